// Parse reads a DynamicPrefix spec once into a validated model: the
// acquisition settings with their defaults, the prefix filter, and the named
// address ranges and subnets, parsed. Every consumer (aggregation, pools,
// Services, status) reads the model and resolves names against a prefix here,
// never from the raw strings. Pure.

package model

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
)

// ErrInvalid is wrapped by every error caused by a DynamicPrefix spec or by an
// object's annotations that name parts of it: a fix by the user heals it, so
// retrying does not.
var ErrInvalid = errors.New("spec: cannot be used as written")

// ErrBudgetExceeded marks a write the write-storm breaker refused; status
// reports it as WriteBudgetExceeded.
var ErrBudgetExceeded = errors.New("write budget exceeded")

// Model is a DynamicPrefix spec, parsed.
type Model struct {
	Name string // the DynamicPrefix, for messages
	// ServiceNamespaces are the namespaces whose Services may follow (empty:
	// any; spec.serviceNamespaces).
	ServiceNamespaces []string
	// Interface is the link followed ("" follows every link the agents watch).
	Interface string
	RA        bool // routerAdvertisement acquisition is enabled
	DHCPv6PD  bool // dhcpv6pd acquisition is asked for
	// PDInterface is the link DHCPv6 delegations are requested on
	// (dhcpv6pd.interface): the agents report them there.
	PDInterface string
	// PDClient: the agents' own DHCPv6 client requests the delegation, on one
	// node at a time (dhcpv6pd.mode client); PDNodes may run it, in order of
	// preference (empty: any).
	PDClient bool
	PDNodes  []string
	// PDTrustAfter: once the client has held a delegation other than the
	// current prefix, unconfirmed, this long, its word counts alone (0:
	// never; dhcpv6pd.trustClientAfter).
	PDTrustAfter time.Duration
	// PDTakenBy names the DynamicPrefix, first by name, that already runs
	// the agents' client on PDInterface ("": none; set by the writer from
	// the other DynamicPrefixes, LinkTakenBy). The agents run one client
	// per link, the first DynamicPrefix's by name, and a digest does not
	// say whose delegation it reports: this one adopts nothing there.
	PDTakenBy string
	// DNS is the name followed instead of the agents' reports (nil: the
	// agents' sources).
	DNS        *DNSSource
	GlobalOnly bool // only prefixes inside 2000::/3 are adopted
	Allowed    []netip.Prefix
	// MinLength, MaxLength bound a prefix's length (0: no bound), the
	// acquisition's defaults where prefixFilter sets none (lengthBounds).
	MinLength, MaxLength int
	Quorum               int // nodes that must report a prefix as preferred (at least 1)
	MaxHistory           int // earlier prefixes kept in status.history (1..10)
	HA                   bool
	// Delegated is the length of the delegation an advertised prefix is part
	// of (routerAdvertisement.delegatedPrefixLength; 0: the prefix itself).
	Delegated int
	Ranges    []Range
	Subnets   []Subnet
	// Err says what is wrong with the spec whatever the prefix (unparsable
	// suffixes or allowed prefixes); nil when nothing is. Whether a range or
	// subnet fits a prefix is known only once there is one (Check).
	Err error
}

// DNSSource is acquisition.dns, parsed.
type DNSSource struct {
	Name    string           // fully qualified, lower case, with the final dot
	Servers []netip.AddrPort // empty: the writer's resolv.conf
	Length  int              // the prefix is the answer's address shortened to Length
	// MinInterval, MaxInterval bound the time between two questions.
	MinInterval, MaxInterval time.Duration
}

// String identifies the query: a spec change that changes it starts its
// polling afresh.
func (d *DNSSource) String() string {
	return fmt.Sprintf("%s AAAA /%d via %v every %v..%v", d.Name, d.Length, d.Servers, d.MinInterval, d.MaxInterval)
}

// Range is a named address range: host-part suffixes spliced onto a prefix.
type Range struct {
	Name       string
	Start, End netip.Addr // invalid when the spec's value does not parse
}

// Subnet is the Offset-th subnet of length Length inside a prefix.
type Subnet struct {
	Name      string
	Offset    int64
	Length    int
	Advertise bool   // bgp.advertise
	Community string // bgp.community
}

// Parse reads spec. It never fails as a whole: what cannot be used is in Err.
func Parse(name string, s dynamicprefix.Spec) Model {
	m := Model{Name: name, Quorum: 1}
	var errs []error
	a := s.Acquisition
	if ra := a.RouterAdvertisement; ra != nil {
		m.Interface, m.RA = ra.Interface, ra.Followed()
		if l := ra.DelegatedPrefixLength; l != nil {
			switch {
			case *l < 16 || *l > 64:
				errs = append(errs, fmt.Errorf("routerAdvertisement: delegatedPrefixLength %d is not from 16 to 64", *l))
			case a.DHCPv6PD != nil:
				errs = append(errs, errors.New("routerAdvertisement: delegatedPrefixLength is for Router Advertisements alone: with dhcpv6pd the prefix followed is the delegation"))
			default:
				m.Delegated = *l
			}
		}
	}
	if pd := a.DHCPv6PD; pd != nil {
		m.DHCPv6PD, m.PDInterface = true, pd.Interface
		m.PDClient, m.PDNodes = pd.Client(), pd.NodeNames
		if v := pd.TrustClientAfter; v != "" {
			t, err := time.ParseDuration(v)
			switch {
			case err != nil || t < time.Minute || t > 30*24*time.Hour:
				errs = append(errs, fmt.Errorf("dhcpv6pd: trustClientAfter %q is not a duration from 1m to 720h", v))
			case !m.PDClient:
				errs = append(errs, errors.New("dhcpv6pd: trustClientAfter is for mode client: in mode host nothing confirms a delegation"))
			default:
				m.PDTrustAfter = t
			}
		}
	}
	if a.DNS != nil {
		d, err := parseDNS(a.DNS)
		if err == nil && (a.RouterAdvertisement != nil || a.DHCPv6PD != nil) {
			err = errors.New("dns: a name is followed alone, not beside routerAdvertisement or dhcpv6pd")
		}
		if err != nil {
			errs = append(errs, err)
		}
		m.DNS = d // even when refused: the agents' reports never count for it
	}
	if q := a.Quorum; q != nil && *q > 0 {
		m.Quorum = *q
	}
	m.GlobalOnly = a.PrefixFilter.GlobalOnly()
	m.MinLength, m.MaxLength = lengthBounds(m, a.PrefixFilter)
	if f := a.PrefixFilter; f != nil {
		for _, v := range f.AllowedPrefixes {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("allowedPrefixes: %q is not a prefix", v))
				continue
			}
			m.Allowed = append(m.Allowed, p.Masked())
		}
		if len(f.AllowedPrefixes) > 0 && len(m.Allowed) == 0 {
			// Every entry was garbage: an allowlist that allows nothing stays one.
			m.Allowed = []netip.Prefix{}
		}
		if m.MaxLength > 0 && m.MinLength > m.MaxLength {
			errs = append(errs, fmt.Errorf("prefixFilter: minPrefixLength %d exceeds maxPrefixLength %d", m.MinLength, m.MaxLength))
		}
	}
	m.HA, m.MaxHistory = s.Transition.HA(), s.Transition.History()
	m.ServiceNamespaces = s.ServiceNamespaces
	for _, r := range s.AddressRanges {
		start, err1 := netip.ParseAddr(r.Start)
		end, err2 := netip.ParseAddr(r.End)
		if err1 != nil || err2 != nil || !start.Is6() || !end.Is6() {
			errs = append(errs, fmt.Errorf("address range %q: start and end must be IPv6 suffixes", r.Name))
			start, end = netip.Addr{}, netip.Addr{}
		}
		m.Ranges = append(m.Ranges, Range{Name: r.Name, Start: start, End: end})
	}
	for _, sub := range s.Subnets {
		out := Subnet{Name: sub.Name, Offset: sub.Offset, Length: sub.PrefixLength}
		if sub.BGP != nil {
			out.Advertise, out.Community = sub.BGP.Advertise, sub.BGP.Community
		}
		m.Subnets = append(m.Subnets, out)
	}
	if len(errs) > 0 {
		m.Err = fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return m
}

// The length bounds a prefix is held to where prefixFilter names none: a
// Router Advertisement's prefix is a /64 (SLAAC forms addresses from /64s
// alone), a delegation what a DHCPv6 client may ask for (requestedPrefixLength
// 48 to 64). A forged prefix such as 2000::/3 is never current unless the
// user widens them; a followed name's prefix has the length the user asked
// for (dns.prefixLength) and needs none.
const (
	DefaultRALength                          = 64
	DefaultMinDelegated, DefaultMaxDelegated = 48, 64
)

// lengthBounds are prefixFilter's bounds, each one left out taken from the
// acquisition's default (kept no tighter than the other one set).
func lengthBounds(m Model, f *dynamicprefix.PrefixFilter) (minLength, maxLength int) {
	minLength, maxLength = f.LengthBounds()
	if m.DNS != nil {
		return minLength, maxLength
	}
	lo, hi := DefaultRALength, DefaultRALength
	if m.DHCPv6PD {
		lo, hi = DefaultMinDelegated, DefaultMaxDelegated
		if m.RA {
			lo, hi = min(lo, DefaultRALength), max(hi, DefaultRALength)
		}
	}
	if minLength == 0 {
		minLength = lo
		if maxLength > 0 {
			minLength = min(lo, maxLength)
		}
	}
	if maxLength == 0 {
		maxLength = max(hi, minLength)
	}
	return minLength, maxLength
}

// MaxDNSServers bounds dns.servers (the schema's maxItems).
const MaxDNSServers = 5

// parseDNS reads acquisition.dns. The model it returns is never nil, so that
// a refused one still keeps the agents' reports from counting.
func parseDNS(s *dynamicprefix.DNS) (*DNSSource, error) {
	d := &DNSSource{Name: strings.ToLower(s.Name), Length: s.PrefixLength}
	if !strings.HasSuffix(d.Name, ".") {
		d.Name += "."
	}
	var errs []error
	if !domainName(d.Name) {
		errs = append(errs, fmt.Errorf("dns: name %q is not a domain name", s.Name))
	}
	if d.Length < 16 || d.Length > 64 {
		errs = append(errs, fmt.Errorf("dns: prefixLength %d is not from 16 to 64", d.Length))
	}
	if len(s.Servers) > MaxDNSServers {
		errs = append(errs, fmt.Errorf("dns: %d servers, at most %d", len(s.Servers), MaxDNSServers))
	}
	for _, v := range s.Servers[:min(len(s.Servers), MaxDNSServers)] {
		ap, err := netip.ParseAddrPort(v)
		if err != nil {
			a, err2 := netip.ParseAddr(v)
			if err2 != nil || a.Zone() != "" {
				errs = append(errs, fmt.Errorf("dns: server %q is neither an IP address nor one with a port", v))
				continue
			}
			ap = netip.AddrPortFrom(a, 53)
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if ap.Port() == 0 || ap.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("dns: server %q needs a port other than 0 and no zone", v))
			continue
		}
		if !slices.Contains(d.Servers, ap) {
			d.Servers = append(d.Servers, ap)
		}
	}
	interval := func(field, v, def string) time.Duration {
		if v == "" {
			v = def
		}
		t, err := time.ParseDuration(v)
		if err != nil || t < time.Second || t > 24*time.Hour {
			errs = append(errs, fmt.Errorf("dns: %s %q is not a duration from 1s to 24h", field, v))
			t, _ = time.ParseDuration(def)
		}
		return t
	}
	d.MinInterval = interval("minInterval", s.MinInterval, dynamicprefix.DefaultDNSMinInterval)
	d.MaxInterval = interval("maxInterval", s.MaxInterval, dynamicprefix.DefaultDNSMaxInterval)
	if d.MinInterval > d.MaxInterval {
		errs = append(errs, fmt.Errorf("dns: minInterval %v exceeds maxInterval %v", d.MinInterval, d.MaxInterval))
	}
	return d, errors.Join(errs...)
}

// domainName reports whether name (with its final dot) is a domain name:
// at most 253 characters, labels of 1 to 63 letters, digits, hyphens and
// underscores (as dynamic DNS services allow), none starting or ending
// with a hyphen.
func domainName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Advertises reports whether any subnet asks for a BGP advertisement.
func (m Model) Advertises() bool {
	for _, s := range m.Subnets {
		if s.Advertise {
			return true
		}
	}
	return false
}

// Accept says why the model refuses p, or "" when it accepts it. This is the one
// home of the acceptability rules.
func (m Model) Accept(p netip.Prefix) string {
	if m.GlobalOnly && !digest.GlobalUnicast(p) {
		return "not global unicast (outside 2000::/3)"
	}
	if m.MinLength > 0 && p.Bits() < m.MinLength {
		return fmt.Sprintf("shorter than minPrefixLength /%d", m.MinLength)
	}
	if m.MaxLength > 0 && p.Bits() > m.MaxLength {
		return fmt.Sprintf("longer than maxPrefixLength /%d", m.MaxLength)
	}
	if !m.allowed(p) {
		return "outside allowedPrefixes"
	}
	return ""
}

// Allows reports whether p lies inside allowedPrefixes (any p, when none
// are set).
func (m Model) Allows(p netip.Prefix) bool { return m.allowed(p) }

// allowed reports whether p lies inside allowedPrefixes (if any are set).
func (m Model) allowed(p netip.Prefix) bool {
	if m.Allowed == nil {
		return true
	}
	for _, a := range m.Allowed {
		if a.Bits() <= p.Bits() && a.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// Counts reports whether a prefix a node saw on link, from src, is a report
// for this DynamicPrefix: Router Advertisements (and the addresses they make)
// on its RA interface (any link when it names none), delegations on its
// DHCPv6-PD interface.
func (m Model) Counts(link string, src digest.Source) bool {
	if m.DNS != nil {
		return false // the resolvers' answers alone (decide.Report.Resolver)
	}
	ra := m.RA || !m.DHCPv6PD // neither configured: as RA (the schema requires one)
	if ra && (m.Interface == "" || link == m.Interface) && src&(digest.SourceRA|digest.SourceAddr) != 0 {
		return true
	}
	return m.DHCPv6PD && link == m.PDInterface && src&digest.SourcePD != 0
}

// Follows reports whether the DynamicPrefix acquires anything on link.
func (m Model) Follows(link string) bool {
	return m.Counts(link, digest.SourceRA) || m.Counts(link, digest.SourcePD)
}

// Delegation is the delegation p is part of: p shortened to
// delegatedPrefixLength, or p itself when none is stated (or p is no longer).
// Address ranges and subnets are carved from it.
func (m Model) Delegation(p netip.Prefix) netip.Prefix {
	if m.Delegated == 0 || !p.IsValid() || p.Bits() <= m.Delegated {
		return p
	}
	return netip.PrefixFrom(p.Addr(), m.Delegated).Masked()
}

// Range returns the first and last address of the named range on p's
// delegation.
func (m Model) Range(name string, p netip.Prefix) (first, last netip.Addr, err error) {
	i := m.rangeIndex(name)
	if i < 0 {
		return first, last, fmt.Errorf("%w: DynamicPrefix %q has no address range %q", ErrInvalid, m.Name, name)
	}
	r := m.Ranges[i]
	if !r.Start.IsValid() {
		return first, last, fmt.Errorf("%w: address range %q: start and end must be IPv6 suffixes", ErrInvalid, r.Name)
	}
	p = m.Delegation(p)
	first, last, err = SpliceRange(p, r.Start, r.End)
	if err != nil {
		return first, last, fmt.Errorf("%w: address range %q on %s: %w", ErrInvalid, r.Name, p, err)
	}
	return first, last, nil
}

// Subnet returns the named subnet of p's delegation.
func (m Model) Subnet(name string, p netip.Prefix) (netip.Prefix, error) {
	i := m.subnetIndex(name)
	if i < 0 {
		return netip.Prefix{}, fmt.Errorf("%w: DynamicPrefix %q has no subnet %q", ErrInvalid, m.Name, name)
	}
	s := m.Subnets[i]
	p = m.Delegation(p)
	sub, err := SubnetAt(p, s.Offset, s.Length)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: subnet %q on %s: %w", ErrInvalid, s.Name, p, err)
	}
	return sub, nil
}

// Check reports whether the whole spec can be used with current: Err, a
// delegation outside allowedPrefixes, or the first range or subnet that does
// not fit it.
func (m Model) Check(current netip.Prefix) error {
	if m.Err != nil {
		return m.Err
	}
	if d := m.Delegation(current); d != current && !m.allowed(d) {
		// Subnets would be carved from outside what the user allows.
		return fmt.Errorf("%w: the delegation %s of %s (delegatedPrefixLength %d) is outside allowedPrefixes", ErrInvalid, d, current, m.Delegated)
	}
	for _, r := range m.Ranges {
		if _, _, err := m.Range(r.Name, current); err != nil {
			return err
		}
	}
	for _, s := range m.Subnets {
		if _, err := m.Subnet(s.Name, current); err != nil {
			return err
		}
	}
	return nil
}

// Derived computes status.addressRanges and status.subnets on current.
func (m Model) Derived(current netip.Prefix) ([]AddressRangeStatus, []SubnetStatus, error) {
	if err := m.Check(current); err != nil {
		return nil, nil, err
	}
	var ranges []AddressRangeStatus
	for _, r := range m.Ranges {
		first, last, _ := m.Range(r.Name, current)
		c, _ := Covering(first, last)
		ranges = append(ranges, AddressRangeStatus{Name: r.Name, Start: first.String(), End: last.String(), CIDR: c.String()})
	}
	var subnets []SubnetStatus
	for _, s := range m.Subnets {
		sub, _ := m.Subnet(s.Name, current)
		subnets = append(subnets, SubnetStatus{Name: s.Name, CIDR: sub.String()})
	}
	return ranges, subnets, nil
}

func (m Model) rangeIndex(name string) int {
	for i, r := range m.Ranges {
		if r.Name == name {
			return i
		}
	}
	return -1
}

func (m Model) subnetIndex(name string) int {
	for i, s := range m.Subnets {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// LetsFollow reports whether a Service in namespace ns may follow the
// DynamicPrefix (spec.serviceNamespaces).
func (m Model) LetsFollow(ns string) bool {
	return dynamicprefix.Spec{ServiceNamespaces: m.ServiceNamespaces}.LetsFollow(ns)
}

// LinkTakenBy names the DynamicPrefix among others that runs the agents'
// DHCPv6 client on m's PDInterface before m: in mode client on the same
// interface, on a node both may run on (nodeNames), and first by name
// before m's ("": none, or m is not in mode client). The agents agree (dhcp6.Supervisor.Set runs the first by name
// on a link and refuses the others): the one named is the one whose
// identity the server delegates to there.
func LinkTakenBy(m Model, others []Model) string {
	if !m.DHCPv6PD || !m.PDClient {
		return ""
	}
	first := ""
	for _, o := range others {
		if o.DHCPv6PD && o.PDClient && o.PDInterface == m.PDInterface && o.Name < m.Name && (first == "" || o.Name < first) && shareNodes(o.PDNodes, m.PDNodes) {
			first = o.Name
		}
	}
	return first
}

// shareNodes reports whether two dhcpv6pd.nodeNames lists may name one node
// (an empty list names every node): only there do the agents run one client
// for both.
func shareNodes(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, n := range a {
		if slices.Contains(b, n) {
			return true
		}
	}
	return false
}
