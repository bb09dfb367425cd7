// Package dynamicprefix is the dynamic-prefix.io/v1alpha1 DynamicPrefix API as
// both binaries read it: the spec types (field-compatible with the operator
// users already run), their defaults, and the annotation keys of that API. It
// imports nothing outside the standard library, so the agent reads
// DynamicPrefixes with the same types the writer does without linking
// apimachinery. The object, its status and the parsed model of a spec are the
// writer's (internal/writer/api).
package dynamicprefix

import (
	"bytes"
	"encoding/hex"
	"slices"
	"strings"
)

// Annotations read on pools and Services, and the ownership records written.
const (
	AnnotationName         = "dynamic-prefix.io/name"
	AnnotationAddressRange = "dynamic-prefix.io/address-range"
	AnnotationSubnet       = "dynamic-prefix.io/subnet"
	AnnotationManagedBlock = "dynamic-prefix.io/managed-blocks"
	AnnotationManagedCIDRs = "dynamic-prefix.io/managed-cidrs"
	// AnnotationManagedAddresses is the record on MetalLB IPAddressPools.
	AnnotationManagedAddresses = "dynamic-prefix.io/managed-addresses"
)

// Finalizer is the existing operator's, on every DynamicPrefix it reconciled.
// renumber adds none; it removes this one once it has released what a
// DynamicPrefix being deleted had written.
const Finalizer = "dynamic-prefix.io/finalizer"

// OperatorManagedBy is the app.kubernetes.io/managed-by label of the objects
// the existing operator creates (Calico sibling IPPools, BGP advertisements).
const OperatorManagedBy = "dynamic-prefix-operator"

type Spec struct {
	Acquisition   Acquisition    `json:"acquisition"`
	AddressRanges []AddressRange `json:"addressRanges,omitempty"`
	Subnets       []Subnet       `json:"subnets,omitempty"`
	Transition    *Transition    `json:"transition,omitempty"`
	// ServiceNamespaces (renumber addition): the namespaces whose Services
	// may follow; empty, any (as the existing operator). The admission
	// policy renumber-writer-values holds the writer to it too.
	ServiceNamespaces []string `json:"serviceNamespaces,omitempty"`
}

// LetsFollow reports whether a Service in namespace ns may follow a
// DynamicPrefix of spec s.
func (s Spec) LetsFollow(ns string) bool {
	return len(s.ServiceNamespaces) == 0 || slices.Contains(s.ServiceNamespaces, ns)
}

type Acquisition struct {
	RouterAdvertisement *RouterAdvertisement `json:"routerAdvertisement,omitempty"`
	DHCPv6PD            *DHCPv6PD            `json:"dhcpv6pd,omitempty"`
	PrefixFilter        *PrefixFilter        `json:"prefixFilter,omitempty"`
	// DNS (renumber addition): follow a name's AAAA record instead of what
	// the agents see on the LAN; alone, never beside the agents' sources.
	DNS *DNS `json:"dns,omitempty"`
	// Quorum (renumber addition): nodes (with dns: servers) that must report
	// a prefix as preferred.
	Quorum *int `json:"quorum,omitempty"`
}

// DNS (renumber addition) follows a prefix the cluster's LAN does not carry
// (behind NPTv6 the LAN holds a ULA; the ISP's prefix lives on the router's
// WAN): the AAAA record of a name the router keeps updated (its dynamic DNS),
// shortened to PrefixLength. The writer asks every server, each time the
// answers' TTL runs out (within MinInterval and MaxInterval); the prefix
// moves only when a majority of the servers agree. The agents take no part.
type DNS struct {
	Name string `json:"name"`
	// Servers are IP addresses, each with an optional port ("192.0.2.53",
	// "[2001:db8::53]:5353"); empty: the nameservers of the writer's
	// /etc/resolv.conf.
	Servers      []string `json:"servers,omitempty"`
	PrefixLength int      `json:"prefixLength"`
	// MinInterval, MaxInterval bound the time between two questions (Go
	// durations; defaults DefaultDNSMinInterval and DefaultDNSMaxInterval).
	MinInterval string `json:"minInterval,omitempty"`
	MaxInterval string `json:"maxInterval,omitempty"`
}

type RouterAdvertisement struct {
	Interface string `json:"interface,omitempty"`
	Enabled   *bool  `json:"enabled,omitempty"`
	// TrustedRouters: agents believe only RAs from these link-local sources
	// (enforced by the agents; the digest carries no routers).
	TrustedRouters []string `json:"trustedRouters,omitempty"`
	// DelegatedPrefixLength (renumber addition): the length of the delegation
	// the advertised prefix is part of (e.g. 56 when the ISP delegates a /56
	// and the router advertises one /64 of it). Subnets and address ranges
	// are then carved from the delegation, not only from the /64 on the link.
	DelegatedPrefixLength *int `json:"delegatedPrefixLength,omitempty"`
	// FollowDeprecated (renumber addition): on a link where no router
	// prefers an acceptable prefix (behind NPTv6 the router may advertise
	// the ISP's prefix with preferred lifetime 0, so that hosts do not use
	// it), the prefix the senior router advertises with the longest valid
	// lifetime left stands in for a preferred one.
	FollowDeprecated bool `json:"followDeprecated,omitempty"`
}

type DHCPv6PD struct {
	Interface             string `json:"interface"`
	RequestedPrefixLength *int   `json:"requestedPrefixLength,omitempty"`
	// Mode (renumber addition): "client" (default) runs the agents' own
	// DHCPv6 client on one node; "host" follows the delegation a DHCPv6
	// client on the nodes installs.
	Mode string `json:"mode,omitempty"`
	// NodeNames (renumber addition): the nodes that may run the client, in
	// order of preference (empty: any node whose agent follows the interface).
	NodeNames []string `json:"nodeNames,omitempty"`
	// TrustedServers (renumber addition): the DUIDs, in hex (colons
	// allowed), of the only servers the built-in client listens to (empty:
	// any server, and two offering delegations are a conflict).
	TrustedServers []string `json:"trustedServers,omitempty"`
	// TrustClientAfter (renumber addition): a Go duration; once the
	// client has held a delegation other than the current prefix,
	// unconfirmed, this long, its word counts alone (empty: never - the
	// stall is reported and waits for the admin). An opt-in bound on a
	// stall nothing else ends, paid for with the confirmation: a liar client
	// whose confirmers are kept from confirming wins after it.
	TrustClientAfter string `json:"trustClientAfter,omitempty"`
}

// DHCPv6PD modes.
const (
	ModeClient = "client"
	ModeHost   = "host"
)

// DHCPv6PDStatus says which node's agent runs the DHCPv6 client, and which
// confirms its word.
type DHCPv6PDStatus struct {
	ClientNode string `json:"clientNode,omitempty"`
	// ConfirmerNode: the node whose agent solicits with the client's
	// identity (never requesting: the server commits nothing) and reports
	// the delegation offered; a delegation counts when the two agree.
	// Empty with a single eligible node (or nodeNames naming one).
	ConfirmerNode string `json:"confirmerNode,omitempty"`
	// Unconfirmed: what a voting client reported holding when it and the
	// confirmer began to disagree, kept while they do (a confirmation is
	// wanted: the confirmer solicits again when it is set).
	Unconfirmed string `json:"unconfirmed,omitempty"`
	// Since: when the confirmer was last named or, while Unconfirmed is
	// set, when the disagreement began (RFC 3339); past the bound the
	// roles rotate.
	Since string `json:"since,omitempty"`
	// Backing: what the confirmer the last rotation replaced was offered,
	// while the disagreement lasts; a confirmer offered it alike (a second
	// node) takes the client over, and so does one offered another once
	// its own bound passes.
	Backing string `json:"backing,omitempty"`
	// BackedAgainst: what the confirmer that Backing records was asked to
	// confirm (that bound's Unconfirmed; empty: the client held nothing).
	// While the client holds anything else the backing is stale - the
	// server answered the client after it answered the confirmer - and
	// takes nobody over.
	BackedAgainst string `json:"backedAgainst,omitempty"`
	// BackingKept: Backing was recorded at the end of a bound whose backing
	// was stale, the confirmer offered it alike: no claim of the client's
	// makes it stale (a client changing its claim after each probe keeps
	// the role for two rotations at most).
	BackingKept bool `json:"backingKept,omitempty"`
	// ValidLifetime: the shortest valid lifetime (seconds) a confirmer
	// heard the server state for the current prefix since it became
	// current (an infinite one bounds nothing and is left out; 0: none
	// heard). Once the delegation is replaced its drain ends by then,
	// counted from OtherOffered (else the renumbering), whatever the client reports left of it
	// (issue 42: the client's word alone kept it 136 years).
	ValidLifetime int64 `json:"validLifetime,omitempty"`
	// OtherOffered: when a confirmer was first offered a delegation other
	// than the current prefix, while it stayed current (RFC 3339; set once,
	// cleared when the current prefix changes). The server had stopped
	// stating the current one to the identity by then: once replaced, it
	// drains no longer than ValidLifetime from here, however late the
	// renumbering lands (a liar client delaying it, a liar confirmer
	// taking the client over).
	OtherOffered string `json:"otherOffered,omitempty"`
	// UnconfirmedSince: with trustClientAfter set, since when the client
	// has held a delegation other than the current prefix that no
	// confirmer agrees with (RFC 3339), through every rotation while it
	// stays the client; past trustClientAfter its word counts alone.
	UnconfirmedSince string `json:"unconfirmedSince,omitempty"`
}

type PrefixFilter struct {
	RequireGlobalUnicast *bool `json:"requireGlobalUnicast,omitempty"`
	// AllowedPrefixes (renumber addition): only prefixes inside one are adopted.
	AllowedPrefixes []string `json:"allowedPrefixes,omitempty"`
	// MinPrefixLength / MaxPrefixLength bound the length of a plausible
	// delegation, for every source.
	MinPrefixLength *int `json:"minPrefixLength,omitempty"`
	MaxPrefixLength *int `json:"maxPrefixLength,omitempty"`
}

type AddressRange struct {
	Name  string `json:"name"`
	Start string `json:"start"`
	End   string `json:"end"`
}

type Subnet struct {
	Name         string `json:"name"`
	Offset       int64  `json:"offset,omitempty"`
	PrefixLength int    `json:"prefixLength"`
	BGP          *BGP   `json:"bgp,omitempty"`
}

type BGP struct {
	Advertise bool   `json:"advertise,omitempty"`
	Community string `json:"community,omitempty"`
}

type Transition struct {
	Mode             string `json:"mode,omitempty"`
	MaxPrefixHistory int    `json:"maxPrefixHistory,omitempty"`
}

// The schema's defaults, and what both binaries make of a field left out.
const (
	// DefaultRequestedPrefixLength is dhcpv6pd.requestedPrefixLength's
	// default; the schema allows 48..64.
	DefaultRequestedPrefixLength = 56
	// DefaultMaxPrefixHistory is transition.maxPrefixHistory's default; at
	// most MaxPrefixHistory earlier prefixes are kept.
	DefaultMaxPrefixHistory = 2
	MaxPrefixHistory        = 10
	// TransitionHA is transition.mode for Services following the prefix.
	TransitionHA = "ha"
	// DefaultDNSMinInterval, DefaultDNSMaxInterval are dns.minInterval's and
	// dns.maxInterval's defaults: a TTL below the one or above the other is
	// taken as that bound.
	DefaultDNSMinInterval = "10s"
	DefaultDNSMaxInterval = "10m"
)

// Followed reports whether Router Advertisements are followed: configured and
// not enabled: false.
func (r *RouterAdvertisement) Followed() bool { return r != nil && (r.Enabled == nil || *r.Enabled) }

// GlobalOnly is prefixFilter.requireGlobalUnicast (default true: only prefixes
// inside 2000::/3 are adopted).
func (f *PrefixFilter) GlobalOnly() bool {
	return f == nil || f.RequireGlobalUnicast == nil || *f.RequireGlobalUnicast
}

// LengthBounds are prefixFilter.min/maxPrefixLength (0: no bound).
func (f *PrefixFilter) LengthBounds() (minLength, maxLength int) {
	if f == nil {
		return 0, 0
	}
	if f.MinPrefixLength != nil {
		minLength = *f.MinPrefixLength
	}
	if f.MaxPrefixLength != nil {
		maxLength = *f.MaxPrefixLength
	}
	return minLength, maxLength
}

// Client reports whether the agents' own DHCPv6 client requests the
// delegation (mode client, the default) rather than following one a client on
// the nodes installs (mode host).
func (d *DHCPv6PD) Client() bool { return d.Mode != ModeHost }

// RequestedLength is requestedPrefixLength within the schema's bounds, else
// its default.
func (d *DHCPv6PD) RequestedLength() int {
	if l := d.RequestedPrefixLength; l != nil && *l >= 48 && *l <= 64 {
		return *l
	}
	return DefaultRequestedPrefixLength
}

// Servers returns the trusted servers' DUIDs as raw bytes, the malformed
// ones left out (the schema refuses them), sorted and without repeats.
func (d *DHCPv6PD) Servers() [][]byte {
	var out [][]byte
	for _, s := range d.TrustedServers {
		if b, err := hex.DecodeString(strings.ReplaceAll(s, ":", "")); err == nil && len(b) >= 3 {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, bytes.Compare)
	return slices.CompactFunc(out, bytes.Equal)
}

// HA reports whether Services follow the prefix (transition.mode ha).
func (t *Transition) HA() bool { return t != nil && t.Mode == TransitionHA }

// History is how many earlier prefixes status.history keeps
// (transition.maxPrefixHistory, default 2, at most 10).
func (t *Transition) History() int {
	if t == nil || t.MaxPrefixHistory <= 0 {
		return DefaultMaxPrefixHistory
	}
	return min(t.MaxPrefixHistory, MaxPrefixHistory)
}
