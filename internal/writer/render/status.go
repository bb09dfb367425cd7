// Status renders a DynamicPrefix's status from a decision. Rendering an
// unchanged situation returns the previous status unchanged, transition times
// included, so the writer can compare and skip the write.

package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types.
const (
	PrefixAcquired        = decide.PrefixAcquired
	PoolsSynced           = "PoolsSynced"
	Degraded              = "Degraded"
	BGPAdvertisementReady = "BGPAdvertisementReady"
	// Ready sums the others up, as kstatus, Flux, Argo CD and `kubectl wait
	// --for=condition=Ready` expect: a prefix followed, every pool and
	// advertisement in step, nothing degraded.
	Ready = "Ready"
	// RouterConflict: some node's agent hears RAs from one router address
	// that contradict each other (another host speaks as the router). The
	// last agreed prefix holds; Ready does not change.
	RouterConflict = "RouterConflict"
	// ResolversAgree (a DynamicPrefix following a DNS name): every server
	// answers the current prefix. False names the servers that do not and
	// why; the prefix moves only when a majority agrees. Ready does not
	// change.
	ResolversAgree = "ResolversAgree"
	// DelegationConfirmed (the agents' own DHCPv6 client): the delegation
	// the client node reports is the one the server offers the confirmer
	// node (status.dhcpv6pd). False names what disagrees: the delegation
	// moves only when they agree. Ready does not change.
	DelegationConfirmed = "DelegationConfirmed"
)

// Problems the writer found while acting on a DynamicPrefix.
type Problems struct {
	Spec  error // the spec cannot be used as written
	Pools error // at least one pool could not be rendered or written
	// BGP maps advertised subnets to their CiliumBGPAdvertisement; BGPErr says
	// what is missing.
	BGP    map[string]string
	BGPErr error
	// Conflicts are the addresses two following Services ask for.
	Conflicts []Conflict
	// Overlaps are the other DynamicPrefixes that can hand out addresses
	// this one can, and where (PrefixOverlap).
	Overlaps []Overlap
}

// Status returns the status for dp (whose spec parsed to m) given the decision
// at now.
func Status(dp *api.DynamicPrefix, m model.Model, d decide.Decision, p Problems, now time.Time) api.Status {
	prev := dp.Status
	st := api.Status{
		PrefixSource:       d.Source,
		History:            History(m, d.History),
		ObservedGeneration: dp.Generation,
		// LeaseExpiresAt stays empty: a lease derived from the RAs would
		// change on every RA (a write each time), and the one the existing
		// operator left would read as expired while its prefix is current.
		Conditions: append([]metav1.Condition(nil), prev.Conditions...),
	}
	st.DHCPv6PD = d.Confirm.Status(d.PDClient)
	if d.Current.IsValid() {
		st.CurrentPrefix = d.Current.String()
		st.DelegatedPrefix = namedDelegation(m, d.Current)
		ranges, subnets, err := m.Derived(d.Current)
		if err != nil && p.Spec == nil {
			p.Spec = err
		}
		for i := range subnets {
			subnets[i].BGPAdvertisement = p.BGP[subnets[i].Name]
		}
		st.AddressRanges, st.Subnets = ranges, subnets
	}
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: dp.Generation, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
		})
	}
	switch {
	case d.Unreported:
		set(PrefixAcquired, false, ReasonNotReported, NotReportedMessage(m, d.Current))
	case d.Current.IsValid():
		set(PrefixAcquired, true, "Acquired", "following "+d.Current.String())
	case d.Reporting == 0 && m.DNS != nil:
		set(PrefixAcquired, false, "NoReports", "no DNS server to ask (acquisition.dns.servers and the writer's /etc/resolv.conf name none)")
	case d.Reporting == 0:
		set(PrefixAcquired, false, "NoReports", "no node reports the followed interface yet")
	case m.DNS != nil:
		set(PrefixAcquired, false, "NoAcceptablePrefix", "no acceptable prefix is answered by a majority of the servers")
	default:
		set(PrefixAcquired, false, "NoAcceptablePrefix", "no reported prefix is acceptable and preferred by enough nodes")
	}
	switch {
	case m.DNS != nil:
		meta.RemoveStatusCondition(&st.Conditions, RouterConflict)
		if len(d.Dissent) > 0 {
			set(ResolversAgree, false, "ResolversDisagree", DissentMessage(m, d))
		} else {
			set(ResolversAgree, true, ResolversAgree, "every server answers "+st.CurrentPrefix)
		}
	case len(d.Conflicting) > 0:
		meta.RemoveStatusCondition(&st.Conditions, ResolversAgree)
		set(RouterConflict, true, RouterConflict, ConflictMessage(d.Conflicting))
	default:
		meta.RemoveStatusCondition(&st.Conditions, ResolversAgree)
		set(RouterConflict, false, "RoutersAgree", "every node's routers agree with themselves")
	}
	switch {
	case m.DHCPv6PD && m.PDClient && m.PDTakenBy != "":
		set(DelegationConfirmed, false, ReasonInterfaceTaken, TakenMessage(m))
	case m.DHCPv6PD && m.PDClient && st.DHCPv6PD != nil:
		ok, reason, msg := ConfirmedCondition(d)
		set(DelegationConfirmed, ok, reason, msg)
	default:
		meta.RemoveStatusCondition(&st.Conditions, DelegationConfirmed)
	}
	// Only while there is one (no condition otherwise: a DynamicPrefix
	// without conflicts keeps the status it had, and costs no write).
	switch {
	case AnyPublished(p.Conflicts):
		set(ServiceAddressConflict, true, ReasonPublishedElsewhere, ServiceConflictMessage(p.Conflicts))
	case len(p.Conflicts) > 0:
		set(ServiceAddressConflict, true, ServiceAddressConflict, ServiceConflictMessage(p.Conflicts))
	default:
		meta.RemoveStatusCondition(&st.Conditions, ServiceAddressConflict)
	}
	if len(p.Overlaps) > 0 {
		set(PrefixOverlap, true, PrefixOverlap, OverlapMessage(p.Overlaps))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, PrefixOverlap)
	}
	poolReason := "PoolError"
	if errors.Is(p.Pools, model.ErrBudgetExceeded) {
		poolReason = "WriteBudgetExceeded"
	}
	if p.Pools != nil {
		set(PoolsSynced, false, poolReason, p.Pools.Error())
	} else {
		set(PoolsSynced, true, "Synced", "every following pool holds the current entries")
	}
	switch {
	case !m.Advertises():
		meta.RemoveStatusCondition(&st.Conditions, BGPAdvertisementReady)
	case p.BGPErr != nil:
		set(BGPAdvertisementReady, false, "AdvertisementMissing", p.BGPErr.Error())
	default:
		set(BGPAdvertisementReady, true, "Advertised", "every subnet with bgp.advertise has its CiliumBGPAdvertisement")
	}
	var degraded []string
	reason := "Healthy"
	if p.Spec != nil {
		degraded, reason = append(degraded, p.Spec.Error()), "InvalidSpec"
	}
	if d.Unreported {
		degraded, reason = append(degraded, NotReportedMessage(m, d.Current)), ReasonNotReported
	}
	if m.DHCPv6PD && m.PDClient && m.PDTakenBy != "" {
		degraded, reason = append(degraded, TakenMessage(m)), ReasonInterfaceTaken
	}
	if d.PDStalled {
		degraded, reason = append(degraded, StalledMessage(d)), ReasonStalled
	}
	if p.Pools != nil && p.Spec == nil {
		degraded, reason = append(degraded, p.Pools.Error()), poolReason
	}
	set(Degraded, len(degraded) > 0, reason, strings.Join(degraded, "; "))
	var notReady []string
	for _, t := range []string{PrefixAcquired, PoolsSynced, BGPAdvertisementReady} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status != metav1.ConditionTrue {
			notReady = append(notReady, t+" is "+string(c.Status)+" ("+c.Reason+")")
		}
	}
	if AnyPublished(p.Conflicts) {
		// An object is not served where the writer put it: a load
		// balancer publishes its address for another (an ordinary
		// conflict leaves the holder served, and Ready as it is).
		notReady = append(notReady, ServiceAddressConflict+" is True ("+ReasonPublishedElsewhere+")")
	}
	switch {
	case len(degraded) > 0:
		set(Ready, false, reason, strings.Join(degraded, "; "))
	case len(notReady) > 0:
		set(Ready, false, "NotReady", strings.Join(notReady, "; "))
	default:
		set(Ready, true, "Ready", "following "+st.CurrentPrefix+"; every object in step")
	}
	if StatusEqual(st, prev) {
		return prev
	}
	return st
}

// ConflictMessage says which nodes hear a router contradict itself.
func ConflictMessage(nodes []string) string {
	const show = 5
	list := strings.Join(nodes[:min(len(nodes), show)], ", ")
	if len(nodes) > show {
		list += fmt.Sprintf(" and %d more", len(nodes)-show)
	}
	return "node(s) " + list + " hear their router or DHCPv6 server contradict itself (router advertisements from one router address, or DHCPv6 answers under one server DUID, that disagree: another host on the link speaks as it?), or two DHCPv6 servers offer delegations (without trustedServers; the agents' log names both DUIDs: pin the real one); the last agreed prefix holds until they agree again"
}

// InConflict reports whether st has RouterConflict True.
func InConflict(st api.Status) bool {
	return meta.IsStatusConditionTrue(st.Conditions, RouterConflict)
}

// ReasonNotReported is the reason of PrefixAcquired=False and Degraded=True
// while no voting node reports the current prefix.
const ReasonNotReported = "PrefixNotReported"

// NotReportedMessage says what a quiet router (or silent DNS servers) means
// for the DynamicPrefix whose spec parsed to m.
func NotReportedMessage(m model.Model, p netip.Prefix) string {
	if m.DNS != nil {
		return "no DNS server answers " + m.DNS.Name + " in " + p.String() + " any more; it stays current and in the pools"
	}
	return "no voting node reports " + p.String() + " any more (has the router gone quiet?); it stays current and in the pools"
}

// DissentMessage says which DNS servers do not answer the current prefix,
// and why (decide.Decision.Dissent).
func DissentMessage(m model.Model, d decide.Decision) string {
	return strings.Join(d.Dissent, "; ") + fmt.Sprintf(": the prefix moves only when a majority of the %d servers answers %s alike", d.Reporting, m.DNS.Name)
}

// QuietStatus reports whether st says no voting node reports its current prefix.
func QuietStatus(st api.Status) bool {
	c := meta.FindStatusCondition(st.Conditions, PrefixAcquired)
	return c != nil && c.Reason == ReasonNotReported
}

// StatusEqual compares two statuses as the API server would store them (JSON: times
// to the second, nil and empty lists alike).
func StatusEqual(a, b api.Status) bool {
	ja, err1 := json.Marshal(normal(a))
	jb, err2 := json.Marshal(normal(b))
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// namedDelegation is the delegation a status names for p: p shortened to
// delegatedPrefixLength; none without one, or when p is shorter (subnets
// are then carved from p itself, which the status names already), or when
// it lies outside allowedPrefixes. renumber-writer-status admits no such
// delegation, nor renumber-writer-values any address in it: the user who
// narrowed allowedPrefixes while a prefix drained had every status write
// of the writer refused until it expired (and a current prefix's
// delegation outside is an invalid spec, Model.Check, which the status
// must be able to say).
func namedDelegation(m model.Model, p netip.Prefix) string {
	if m.Delegated == 0 || p.Bits() < m.Delegated || !m.Allows(m.Delegation(p)) {
		return ""
	}
	return m.Delegation(p).String()
}

// normal makes nil and empty slices compare equal.
func normal(s api.Status) api.Status {
	if len(s.AddressRanges) == 0 {
		s.AddressRanges = nil
	}
	if len(s.Subnets) == 0 {
		s.Subnets = nil
	}
	if len(s.History) == 0 {
		s.History = nil
	}
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
	return s
}

// NamesNewPrefix reports whether d pools a prefix that st does not name, with
// the delegation m carves it from: neither its current prefix nor a history
// entry that has not expired. The writer's admission policy lets it write
// into objects only addresses in the prefixes (and delegations) the status
// names (manifests/writer/policy-values.yaml), so such a status is written
// before the objects.
func NamesNewPrefix(st api.Status, m model.Model, d decide.Decision) bool {
	named := map[netip.Prefix]string{} // prefix -> its delegation, as named
	if p, err := netip.ParsePrefix(st.CurrentPrefix); err == nil {
		named[p] = st.DelegatedPrefix
	}
	for _, h := range st.History {
		if p, err := netip.ParsePrefix(h.Prefix); err == nil && h.State != model.StateExpired {
			if _, ok := named[p]; !ok {
				named[p] = h.DelegatedPrefix
			}
		}
	}
	for _, p := range d.Pooled {
		del, ok := named[p]
		if !ok {
			return true
		}
		if m.Delegated != 0 && del != namedDelegation(m, p) {
			return true
		}
	}
	return false
}

// DrainsAnew reports whether d drains a prefix that st does not name
// draining: renumber-writer-values admits a sibling IPPool's CIDR only
// inside a prefix the status names draining (a stolen token's "sibling" lay
// over the current prefix, red team r7b), so such a status too is written
// before the objects - a prefix coming back (A->B->A) is named already, but
// B drains only from this status.
func DrainsAnew(st api.Status, d decide.Decision) bool {
	draining := map[netip.Prefix]bool{}
	for _, h := range st.History {
		if p, err := netip.ParsePrefix(h.Prefix); err == nil && h.State == model.StateDraining {
			draining[p.Masked()] = true
		}
	}
	for _, h := range d.History {
		if p, err := netip.ParsePrefix(h.Prefix); err == nil && h.State == model.StateDraining && !draining[p.Masked()] {
			return true
		}
	}
	return false
}
