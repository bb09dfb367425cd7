// Package inspect explains what the writer sees and decides, for kubectl
// renumber status: for each DynamicPrefix the current prefix and why (each
// node's vote from its decoded digest, the quorum, what was rejected or could
// not be read), the draining prefixes and their deadlines, every object that
// follows it and whether it holds what the writer would write now, and who
// holds the writer's Lease. Build is pure; Gather reads a shadow pipeline.
package inspect

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/controller"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Input is what a report is built from, as values.
type Input struct {
	Now             time.Time
	DynamicPrefixes []*unstructured.Unstructured
	// Votes are the Nodes with a digest, as the writer's ballot judges them
	// (controller.Ballot.Votes).
	Votes []decide.Vote
	// Answers are, for each DynamicPrefix following a DNS name, its servers'
	// reports (resolve.Sources.Prime), by its name.
	Answers map[string][]decide.Report
	// Followers are the objects that follow a DynamicPrefix.
	Followers []Follower
	// Plan is what a shadow pass over each DynamicPrefix would write now, by
	// its name.
	Plan  map[string][]permit.Change
	Lease *Lease
}

// Follower is an object that follows a DynamicPrefix.
type Follower struct {
	DynamicPrefix string `json:"-"`
	Kind          string `json:"kind"`
	// Object names it as the plan does: "resource/name" or "resource/namespace/name".
	Object string `json:"object"`
	// Mapping: a Service's published addresses and what its router maps
	// them to (holdings.AnnotationMapping), "inside -> outside (how)".
	Mapping []string `json:"mapping,omitempty"`
}

// Lease is the writer's Lease.
type Lease struct {
	Holder    string     `json:"holder"`
	RenewedAt *time.Time `json:"renewedAt,omitempty"`
}

// Report is the whole answer.
type Report struct {
	DynamicPrefixes []DynamicPrefix `json:"dynamicPrefixes"`
	Lease           *Lease          `json:"lease,omitempty"`
}

// DynamicPrefix is one DynamicPrefix explained.
type DynamicPrefix struct {
	Name    string `json:"name"`
	Current string `json:"current,omitempty"`
	Source  string `json:"source,omitempty"`
	// Delegation is the delegation subnets are carved from
	// (routerAdvertisement.delegatedPrefixLength), if one is stated.
	Delegation string `json:"delegation,omitempty"`
	// DHCPv6Client is the node running the built-in DHCPv6 client, if any.
	DHCPv6Client string `json:"dhcpv6Client,omitempty"`
	// DHCPv6Confirmer is the node confirming the client's delegation;
	// DHCPv6Unconfirmed what the client holds that it is not offered, and
	// since when (status.dhcpv6pd).
	DHCPv6Confirmer   string `json:"dhcpv6Confirmer,omitempty"`
	DHCPv6Unconfirmed string `json:"dhcpv6Unconfirmed,omitempty"`
	DHCPv6Since       string `json:"dhcpv6Since,omitempty"`
	// DHCPv6TakenBy is the DynamicPrefix, first by name, whose client the
	// agents run on this one's interface instead (InterfaceTaken: nothing
	// is adopted from it here), as the writer computes it.
	DHCPv6TakenBy string `json:"dhcpv6TakenBy,omitempty"`
	// DNSName is the name followed (acquisition.dns); its servers vote.
	DNSName    string      `json:"dnsName,omitempty"`
	Why        string      `json:"why"`
	Quorum     int         `json:"quorum"`
	Votes      []Vote      `json:"votes"`
	Rejected   []Rejected  `json:"rejected,omitempty"`
	Draining   []Draining  `json:"draining,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	Objects    []Object    `json:"objects"`
}

// Vote is what one node reports on the DynamicPrefix's interface (or one DNS
// server answers, for a DynamicPrefix following a name).
type Vote struct {
	Node       string   `json:"node"`
	Preferred  []string `json:"preferred,omitempty"`
	Deprecated []string `json:"deprecated,omitempty"`
	// Problem says why the node does not vote ("" when it does).
	Problem string `json:"problem,omitempty"`
}

// Rejected is a prefix reported as preferred and not adopted.
type Rejected struct {
	Prefix string `json:"prefix"`
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// Draining is an earlier prefix still in the pools.
type Draining struct {
	Prefix  string     `json:"prefix"`
	Expires *time.Time `json:"expires,omitempty"`
}

// Condition is a status condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Object is a follower and whether it holds what the writer would write now.
type Object struct {
	Follower
	InSync  bool            `json:"inSync"`
	Pending []permit.Change `json:"pending,omitempty"`
}

// Build explains every DynamicPrefix in in.
func Build(in Input) Report {
	r := Report{Lease: in.Lease, DynamicPrefixes: []DynamicPrefix{}}
	all := make([]any, len(in.DynamicPrefixes)) // as the writer's cache lists them
	for i, u := range in.DynamicPrefixes {
		all[i] = u
	}
	for _, u := range in.DynamicPrefixes {
		r.DynamicPrefixes = append(r.DynamicPrefixes, explain(in, u, all))
	}
	slices.SortFunc(r.DynamicPrefixes, func(a, b DynamicPrefix) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

// explain explains u, one of all (every DynamicPrefix: another may have
// taken its interface).
func explain(in Input, u *unstructured.Unstructured, all []any) DynamicPrefix {
	out := DynamicPrefix{Name: u.GetName(), Votes: []Vote{}, Objects: []Object{}}
	dp, err := api.FromUnstructured(u)
	if err != nil {
		out.Why = "the object cannot be read: " + err.Error()
		return out
	}
	m := model.Parse(u.GetName(), dp.Spec)
	m.PDTakenBy = controller.TakenBy(m, all) // as the writer's pass does
	out.Quorum = m.Quorum
	out.DHCPv6TakenBy = m.PDTakenBy
	var reports []decide.Report
	if m.DNS != nil {
		out.DNSName = m.DNS.Name
		reports = in.Answers[u.GetName()]
		for _, r := range reports {
			vote := Vote{Node: r.Node, Problem: r.Problem}
			vote.Preferred, vote.Deprecated = reported(r.Digest, func(string, digest.Source) bool { return true })
			out.Votes = append(out.Votes, vote)
		}
	}
	for _, n := range in.Votes {
		if m.DNS != nil {
			break // no node's digest counts for it
		}
		vote := Vote{Node: n.Node}
		switch {
		case n.Err != nil:
			vote.Problem = "digest cannot be read: " + n.Err.Error()
		case n.Lapsed:
			vote.Problem = "not Ready for longer than the grace: its digest does not vote"
		default:
			reports = append(reports, n.Report)
		}
		vote.Preferred, vote.Deprecated = reported(n.Digest, m.Counts)
		out.Votes = append(out.Votes, vote)
	}
	if m.DNS == nil {
		slices.SortFunc(out.Votes, func(a, b Vote) int { return cmp.Compare(a.Node, b.Node) })
	}

	d := decide.For(m, render.Prior(dp.Status), reports, in.Now)
	for _, rej := range d.Rejected {
		out.Rejected = append(out.Rejected, Rejected{Prefix: rej.Prefix.String(), Reason: rej.Reason, Nodes: rej.Nodes})
	}
	out.Current, out.Source = dp.Status.CurrentPrefix, dp.Status.PrefixSource
	out.Delegation = dp.Status.DelegatedPrefix
	if pd := dp.Status.DHCPv6PD; pd != nil {
		out.DHCPv6Client, out.DHCPv6Confirmer = pd.ClientNode, pd.ConfirmerNode
		out.DHCPv6Unconfirmed, out.DHCPv6Since = pd.Unconfirmed, pd.Since
	}
	out.Why = why(m, d, dp.Status.CurrentPrefix)
	for _, h := range dp.Status.History {
		if h.State != model.StateDraining {
			continue
		}
		dr := Draining{Prefix: h.Prefix}
		if h.ExpiresAt != nil {
			t := h.ExpiresAt.UTC()
			dr.Expires = &t
		}
		out.Draining = append(out.Draining, dr)
	}
	for _, c := range dp.Status.Conditions {
		out.Conditions = append(out.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}

	pending := map[string][]permit.Change{}
	for _, c := range in.Plan[out.Name] {
		pending[c.Object] = append(pending[c.Object], c)
	}
	objects := []Follower{{DynamicPrefix: out.Name, Kind: "DynamicPrefix", Object: "dynamicprefixes/" + out.Name}}
	for _, f := range in.Followers {
		// Services are written in transition mode ha, or for a mapped target.
		if f.DynamicPrefix == out.Name && (m.HA || f.Kind != "Service" || len(f.Mapping) > 0) {
			objects = append(objects, f)
		}
	}
	for _, f := range objects {
		out.Objects = append(out.Objects, Object{Follower: f, InSync: len(pending[f.Object]) == 0, Pending: pending[f.Object]})
		delete(pending, f.Object)
	}
	for _, o := range slices.Sorted(maps.Keys(pending)) { // to be created
		out.Objects = append(out.Objects, Object{Follower: Follower{DynamicPrefix: out.Name, Object: o}, Pending: pending[o]})
	}
	return out
}

// reported lists what d reports that counts (model.Model.Counts for a node's
// digest), preferred and deprecated.
func reported(d digest.Node, counts func(link string, src digest.Source) bool) (preferred, deprecated []string) {
	for _, l := range d.Links {
		for _, p := range l.Prefixes {
			if !counts(l.Name, p.Sources) {
				continue
			}
			s := p.Prefix.String()
			if p.Deprecated {
				deprecated = append(deprecated, s)
			} else if !slices.Contains(preferred, s) {
				preferred = append(preferred, s)
			}
		}
	}
	return preferred, deprecated
}

// why says in a sentence why the current prefix is what it is.
func why(m model.Model, d decide.Decision, current string) string {
	cur, _ := netip.ParsePrefix(current)
	switch {
	case m.Err != nil:
		return "the spec is invalid: " + m.Err.Error()
	case m.PDTakenBy != "":
		return render.TakenMessage(m)
	case m.DNS != nil:
		return whyDNS(m, d, cur)
	case !cur.IsValid() && d.Reporting == 0:
		return "no node reports on " + cmp.Or(m.Interface, "any link") + " yet"
	case !cur.IsValid():
		return fmt.Sprintf("no prefix has the quorum of %d preferring node(s) yet", m.Quorum)
	case d.Current != cur:
		return fmt.Sprintf("%s now has %d of %d reporting nodes (quorum %d): the writer is about to follow it",
			d.Current, d.Votes[d.Current], d.Reporting, m.Quorum)
	case d.Unreported:
		return "no voting node reports it any more (a quiet router?); it stays until a prefix reaches the quorum"
	}
	return fmt.Sprintf("%d of %d reporting node(s) prefer it (quorum %d)", d.Votes[cur], d.Reporting, m.Quorum)
}

// whyDNS explains the decision for a DynamicPrefix following a DNS name.
func whyDNS(m model.Model, d decide.Decision, cur netip.Prefix) string {
	switch {
	case d.Reporting == 0:
		return "no DNS server to ask for " + m.DNS.Name
	case !cur.IsValid():
		return fmt.Sprintf("no prefix is answered by a majority of the %d servers (quorum %d) yet", d.Reporting, m.Quorum)
	case d.Current != cur:
		return fmt.Sprintf("%s is now answered by %d of %d servers (quorum %d): the writer is about to follow it",
			d.Current, d.Votes[d.Current], d.Reporting, m.Quorum)
	case d.Unreported:
		return "no server answers it any more; it stays until a prefix is answered by a majority"
	}
	return fmt.Sprintf("%d of %d servers answer %s in it (quorum %d)", d.Votes[cur], d.Reporting, m.DNS.Name, m.Quorum)
}

// Summary is a one-line account of a DynamicPrefix's objects.
func (dp DynamicPrefix) Summary() string {
	n := 0
	for _, o := range dp.Objects {
		if !o.InSync {
			n++
		}
	}
	if n == 0 {
		return fmt.Sprintf("%d object(s), all in sync", len(dp.Objects))
	}
	return fmt.Sprintf("%d object(s), %d not yet as the writer would write them", len(dp.Objects), n)
}

func list(v []string) string {
	if len(v) == 0 {
		return "-"
	}
	return strings.Join(v, ", ")
}

// Problems lists what keeps r from being healthy: a DynamicPrefix whose
// Degraded condition is True, an object not as the writer would write it.
// None: everything is in sync (kubectl renumber status exits 0).
func (r Report) Problems() []string {
	var out []string
	for _, dp := range r.DynamicPrefixes {
		said := false // the status says its interface is taken
		for _, c := range dp.Conditions {
			if c.Type == render.Degraded && c.Status == "True" {
				out = append(out, fmt.Sprintf("%s is Degraded (%s)", dp.Name, c.Reason))
			}
			said = said || c.Reason == render.ReasonInterfaceTaken
		}
		if dp.DHCPv6TakenBy != "" && !said {
			// The writer has not said so yet (its pass is to come, or it
			// is not running): the status alone would not tell.
			out = append(out, fmt.Sprintf("%s: its DHCPv6 interface is taken by %s (%s)", dp.Name, dp.DHCPv6TakenBy, render.ReasonInterfaceTaken))
		}
		for _, o := range dp.Objects {
			if !o.InSync {
				out = append(out, fmt.Sprintf("%s: %s is not in sync", dp.Name, o.Object))
			}
		}
	}
	return out
}
