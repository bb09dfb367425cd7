package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/holdings"
)

// TestAStolenWriterTokenMovesNoAddress plays a stolen writer token against
// the real API server and the shipped policies: seeded random writes - lists
// up to and past the bounds, padded lists, entries inside, outside and in
// expired prefixes, peers moved between NetworkPolicy rules, the user's
// entries and the records taken out - on objects that follow home (whose
// status names 2001:db8:1::/64 current and 2001:db8:2::/64 draining), one in
// a namespace home does not let follow, and objects that follow nothing.
// After every write, whatever the API server answered, it reads the object
// back and checks the property:
//   - on an object following home from an allowed namespace, an entry that
//     is new (in its address or target annotation, or its rule) lies inside
//     home's prefixes;
//   - on the others, nothing is new there, and on an object that follows
//     nothing what went out (of an annotation, or a rule) is what its record
//     named (the user's entries stay), and its records only shrink;
//   - on an object that follows home, its records stay true
//     (recordViolations, r6b): what is added they name, they grow only by
//     what is added, what goes out they named, what they drop is gone, and
//     they are never removed;
//
// and that the bounds never refuse what the writer honestly writes (a few
// new entries inside the prefixes beside what is there, within the bounds,
// named in the record).
func TestAStolenWriterTokenMovesNoAddress(t *testing.T) {
	s := stealWriterToken(t, map[string]any{"serviceNamespaces": []any{"default"}})
	createNamespace(t, s.w, "tenant")
	follow := map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationIPs: "192.0.2.7", holdings.AnnotationTarget: "lb.example.org"}
	createService(t, s.w, "web", follow)
	createServiceIn(t, s.w, "tenant", "web", follow)
	createService(t, s.w, "other", map[string]string{
		holdings.AnnotationIPs: "192.0.2.9,2001:db8:1::9", holdings.AnnotationManagedIPs: "2001:db8:1::9",
		holdings.AnnotationTarget: "a.example.org,2001:db8:1::9", holdings.AnnotationManagedTarget: "2001:db8:1::9"})
	for name, ann := range map[string]map[string]any{"lan": {"dynamic-prefix.io/name": "home"}, "free": {"dynamic-prefix.io/managed-cidrs": "2001:db8:1::/64"}} {
		var egress []any
		for i, peers := range [][]any{{"0.0.0.0/0", "2001:db8:1::/64"}, {"10.0.0.0/8", "pods"}, {"::/0"}} {
			var to []any
			for _, p := range peers {
				to = append(to, peer(p.(string)))
			}
			egress = append(egress, map[string]any{"to": to, "ports": []any{map[string]any{"port": int64(80 + i)}}})
		}
		apply(t, s.w, networkPolicyGVR, map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": name, "namespace": "default", "annotations": ann},
			"spec":     map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Egress"}, "egress": egress},
		})
	}
	apply(t, s.w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "grp", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	apply(t, s.w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "free", "annotations": map[string]any{"dynamic-prefix.io/managed-cidrs": "2001:db8:1::/64"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24", "2001:db8:1::/64"}},
	})

	targets := []obj{
		{serviceGVR, "default", "web", true}, {serviceGVR, "tenant", "web", false}, {serviceGVR, "default", "other", false},
		{networkPolicyGVR, "default", "lan", true}, {networkPolicyGVR, "default", "free", false},
		{groupGVR, "", "grp", true}, {groupGVR, "", "free", false},
	}
	g := gen{rand.New(rand.NewPCG(42, 1))}
	const steps = 300
	var admitted, honestWrites int
	for step := range steps {
		o := targets[g.IntN(len(targets))]
		before := s.read(t, o.gvr, o.ns, o.name)
		body, fair := g.write(o, before)
		err := s.patch(o.gvr, o.ns, o.name, body)
		if err == nil {
			admitted++
		}
		if fair {
			honestWrites++
			if err != nil {
				t.Errorf("step %d: an honest write to %s refused: %v\n%s", step, o, err, body)
			}
		}
		after := s.read(t, o.gvr, o.ns, o.name)
		for _, v := range violations(o, before, after) {
			t.Errorf("step %d: %s: %s (the write %s: %s)", step, o, v, errString(err), trim(body))
		}
	}
	t.Logf("%d writes, %d admitted, %d of them honest", steps, admitted, honestWrites)
}

// obj is one object the stolen token writes; following: it follows home from
// a namespace home lets follow.
type obj struct {
	gvr       schema.GroupVersionResource
	ns, name  string
	following bool
}

func (o obj) String() string { return o.gvr.Resource + " " + strings.TrimPrefix(o.ns+"/"+o.name, "/") }

// lists are an object's entries by key (a Service's annotation, a
// NetworkPolicy's rule, a CIDR group's list), and a Service's records.
func lists(gvr schema.GroupVersionResource, u *unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	switch gvr {
	case serviceGVR:
		for k, v := range u.GetAnnotations() {
			if slices.Contains(holdings.AddressKeys, k) || strings.HasSuffix(k, "/target") ||
				k == holdings.AnnotationManagedIPs || k == holdings.AnnotationManagedTarget {
				out[k] = strings.Split(v, ",")
			}
		}
	case networkPolicyGVR:
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
		for i, r := range rules {
			to, _, _ := unstructured.NestedSlice(r.(map[string]any), "to")
			for _, p := range to {
				if c, ok, _ := unstructured.NestedString(p.(map[string]any), "ipBlock", "cidr"); ok {
					out[fmt.Sprint(i)] = append(out[fmt.Sprint(i)], c)
				}
			}
		}
	default:
		out["externalCIDRs"], _, _ = unstructured.NestedStringSlice(u.Object, "spec", "externalCIDRs")
	}
	if gvr != serviceGVR {
		if v, ok := u.GetAnnotations()[poolRecord]; ok {
			out[poolRecord] = strings.Split(v, ",")
		}
	}
	return out
}

// poolRecord is the record of the NetworkPolicies and CIDR groups here.
const poolRecord = "dynamic-prefix.io/managed-cidrs"

// recordOf is the record naming what the writer owns of key k's entries
// ("" for a record itself).
func recordOf(gvr schema.GroupVersionResource, k string) string {
	switch {
	case k == poolRecord || k == holdings.AnnotationManagedIPs || k == holdings.AnnotationManagedTarget:
		return ""
	case gvr != serviceGVR:
		return poolRecord
	case strings.HasSuffix(k, "/target"):
		return holdings.AnnotationManagedTarget
	}
	return holdings.AnnotationManagedIPs
}

// violations are what the write that turned before into after broke of the
// property.
func violations(o obj, before, after *unstructured.Unstructured) []string {
	was, is := lists(o.gvr, before), lists(o.gvr, after)
	// A record holds no address a load balancer reads; on a Service that
	// follows nothing it says what the writer may take out, so there it may
	// only shrink.
	opted := before.GetAnnotations()["dynamic-prefix.io/name"] != ""
	var out []string
	for k, entries := range is {
		if opted && recordOf(o.gvr, k) == "" {
			continue
		}
		for _, e := range entries {
			e = strings.TrimSpace(e)
			if e == "" || slices.ContainsFunc(was[k], func(w string) bool { return strings.TrimSpace(w) == e }) {
				continue
			}
			if !o.following {
				out = append(out, fmt.Sprintf("%s new in %s of an object that may get nothing", e, k))
			} else if !inPrefixes(e) {
				out = append(out, fmt.Sprintf("%s new in %s, outside %v", e, k, inside))
			}
		}
	}
	if opted {
		_, hadIPs := before.GetAnnotations()[holdings.AnnotationManagedIPs]
		_, hadTargets := before.GetAnnotations()[holdings.AnnotationManagedTarget]
		_, hadPool := before.GetAnnotations()[poolRecord]
		unrecorded := o.gvr == serviceGVR && !hadIPs && !hadTargets || o.gvr != serviceGVR && !hadPool
		out = append(out, recordViolations(o.gvr, was, is, unrecorded)...)
		for r, had := range map[string]bool{holdings.AnnotationManagedIPs: hadIPs, holdings.AnnotationManagedTarget: hadTargets, poolRecord: hadPool} {
			if _, has := after.GetAnnotations()[r]; had && !has {
				out = append(out, fmt.Sprintf("the record %s removed", r))
			}
		}
	}
	if !opted {
		for k, entries := range was {
			record := recordOf(o.gvr, k)
			if record == "" {
				continue
			}
			for _, e := range entries {
				e = strings.TrimSpace(e)
				if e != "" && !slices.Contains(trimmed(is[k]), e) && !slices.Contains(trimmed(was[record]), e) {
					out = append(out, fmt.Sprintf("the user's %s taken out of %s", e, k))
				}
			}
		}
	}
	return out
}

// recordViolations are what a write to an object that follows a
// DynamicPrefix broke of its records' truth (the writer's memory of which
// entries are its own): an entry added is named in the record after (a
// target under a key the writer writes, unless the user held it under
// another target key); the record grows only by entries the write added
// (but on an object with no record, where the writer's first write owns
// IPv6 entries by the existing operator's rule); an entry taken out was
// named in the record before (the same exception); an entry the record
// drops is gone from every key the writer owns under.
func recordViolations(gvr schema.GroupVersionResource, was, is map[string][]string, unrecorded bool) []string {
	var out []string
	keysOf := map[string][]string{}
	for _, m := range []map[string][]string{was, is} {
		for k := range m {
			if r := recordOf(gvr, k); r != "" && !slices.Contains(keysOf[r], k) {
				keysOf[r] = append(keysOf[r], k)
			}
		}
	}
	geometric := func(e string) bool { return unrecorded && strings.Contains(e, ":") }
	for r, keys := range keysOf {
		recBefore, recAfter := trimmed(was[r]), trimmed(is[r])
		ownedUnder := func(k string) bool {
			return r != holdings.AnnotationManagedTarget || slices.Contains(holdings.DefaultTargetKeys, k)
		}
		heldBefore := func(e string) bool {
			return r == holdings.AnnotationManagedTarget && slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(trimmed(was[k]), e) })
		}
		for _, k := range keys {
			for _, e := range trimmed(is[k]) {
				if e != "" && !slices.Contains(trimmed(was[k]), e) && !(ownedUnder(k) && slices.Contains(recAfter, e)) && !heldBefore(e) {
					out = append(out, fmt.Sprintf("%s added to %s, which %s does not name", e, k, r))
				}
			}
			for _, e := range trimmed(was[k]) {
				if e != "" && !slices.Contains(trimmed(is[k]), e) && !slices.Contains(recBefore, e) && !geometric(e) {
					out = append(out, fmt.Sprintf("%s taken out of %s, which %s did not name", e, k, r))
				}
			}
		}
		for _, e := range recAfter {
			if e != "" && !slices.Contains(recBefore, e) && !slices.ContainsFunc(keys, func(k string) bool {
				return slices.Contains(trimmed(is[k]), e) && (!slices.Contains(trimmed(was[k]), e) || geometric(e))
			}) {
				out = append(out, fmt.Sprintf("%s grew by %s, which the write did not add", r, e))
			}
		}
		for _, e := range recBefore {
			if e != "" && !slices.Contains(recAfter, e) && slices.ContainsFunc(keys, func(k string) bool {
				return ownedUnder(k) && slices.Contains(trimmed(is[k]), e)
			}) {
				out = append(out, fmt.Sprintf("%s dropped %s, which stays", r, e))
			}
		}
	}
	return out
}

func trimmed(l []string) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = strings.TrimSpace(e)
	}
	return out
}

// inPrefixes reports whether an address or CIDR lies inside home's
// prefixes.
func inPrefixes(e string) bool {
	for _, p := range inside {
		pp := netip.MustParsePrefix(p)
		if a, err := netip.ParseAddr(e); err == nil && pp.Contains(a) {
			return true
		}
		if c, err := netip.ParsePrefix(e); err == nil && c.Bits() >= pp.Bits() && pp.Contains(c.Addr()) {
			return true
		}
	}
	return false
}

// gen makes the stolen token's writes.
type gen struct{ *rand.Rand }

// entry is a random address (cidr: a CIDR) from everywhere the token might
// aim: home's current and draining prefixes, its expired one, outside,
// IPv4, a name, junk.
func (g gen) entry(cidr bool) string {
	host := fmt.Sprintf("%x", g.IntN(0xffff)+1)
	pick := []string{"2001:db8:1::", "2001:db8:2::", "2001:db8:3::", "2001:db8:bad::", "::"}[g.IntN(5)]
	switch n := g.IntN(10); {
	case n < 6 && cidr:
		return []string{pick + "/64", pick + host + "/128", "2001:db8::/32", "::/0", "0.0.0.0/0"}[g.IntN(5)]
	case n < 6:
		return pick + host
	case n < 8:
		return "192.0.2." + fmt.Sprint(g.IntN(255))
	case n < 9:
		return "h" + host + ".example.org"
	}
	return []string{"", " ", "not-an-address", "2001:db8:1::1/200"}[g.IntN(4)]
}

// honestEntry is an entry the writer could write on a following object.
func (g gen) honestEntry(cidr bool) string {
	p := []string{"2001:db8:1::", "2001:db8:2::"}[g.IntN(2)]
	if cidr {
		return p + "/64"
	}
	return fmt.Sprintf("%s%x", p, g.IntN(0xffff)+1)
}

// size is how many entries to add: mostly few, sometimes near the bounds,
// sometimes far past them.
func (g gen) size() int {
	switch n := g.IntN(10); {
	case n < 6:
		return g.IntN(12)
	case n < 9:
		return 56 + g.IntN(16)
	}
	return []int{200, 300, 600}[g.IntN(3)]
}

// mode is how the token builds a list.
type mode int

const (
	honest mode = iota // what it has, and a few new entries inside the prefixes
	random             // some of what it has, and entries from anywhere, shuffled
	padded             // 600 entries inside the prefixes; once there, the same and one outside
	sneak              // what it has, a few entries inside, and perhaps one from anywhere
	strip              // some of what it has
)

// mode picks one; honest only on an object that follows home.
func (g gen) mode(following bool) mode {
	if following && g.IntN(4) == 0 {
		return honest
	}
	return mode(1 + g.IntN(4))
}

// list builds from was, in mode m; fair: honest, and within the bound.
func (g gen) list(was []string, cidr bool, m mode, bound int) ([]string, bool) {
	var out []string
	for _, e := range was {
		if m != random && m != strip || g.IntN(2) == 0 {
			out = append(out, e)
		}
	}
	switch m {
	case honest, sneak:
		for range g.IntN(12) {
			out = append(out, g.honestEntry(cidr))
		}
		if m == sneak && g.IntN(2) == 0 {
			out = append(out, g.entry(cidr))
		}
	case random:
		for range g.size() {
			out = append(out, g.entry(cidr))
		}
		g.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	case padded: // padded first, then the same and one outside
		if len(was) < 600 {
			for range 600 {
				out = append(out, g.honestEntry(cidr))
			}
		} else {
			out = append(out, map[bool]string{false: "2001:db8:bad::1", true: "2001:db8:bad::/64"}[cidr])
		}
	}
	return out, m == honest && len(out) <= bound
}

// write is a merge patch for o, and whether it is one the writer could
// honestly make (and so must be admitted).
func (g gen) write(o obj, u *unstructured.Unstructured) (string, bool) {
	m := g.mode(o.following)
	was := lists(o.gvr, u)
	var body map[string]any
	var fair bool
	switch o.gvr {
	case serviceGVR:
		key := []string{holdings.AnnotationIPs, holdings.AnnotationKubeVIPIPs, holdings.AnnotationTarget, "x.example.org/target",
			holdings.AnnotationManagedIPs, holdings.AnnotationManagedTarget}[g.IntN(6)]
		if m == honest {
			key = []string{holdings.AnnotationIPs, holdings.AnnotationTarget}[g.IntN(2)]
		}
		l, ok := g.list(was[key], false, m, 64)
		var v any = strings.Join(l, ",")
		if len(l) == 0 {
			v = nil
		}
		ann := map[string]any{key: v}
		if m == honest { // the writer names what it adds in the record
			record := recorded(was[recordOf(o.gvr, key)], was[key], l)
			ann[recordOf(o.gvr, key)], ok = strings.Join(record, ","), ok && len(record) <= 64
		}
		body, fair = map[string]any{"metadata": map[string]any{"annotations": ann}}, ok
	case networkPolicyGVR:
		// Each rule keeps its other peers and ports; its ipBlocks are some
		// of any rule's (a move) and new ones.
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
		var all []string
		for _, l := range was {
			all = append(all, l...)
		}
		fair = true
		record := was[poolRecord]
		for i, r := range rules {
			r := r.(map[string]any)
			to, _, _ := unstructured.NestedSlice(r, "to")
			pool := was[fmt.Sprint(i)]
			if m != honest && g.IntN(2) == 0 { // a move: any rule's peers
				pool = all
			}
			l, ok := g.list(pool, true, m, 64)
			fair = fair && ok
			if m == honest {
				record = recorded(record, was[fmt.Sprint(i)], l)
			}
			var peers []any
			for _, p := range to {
				if _, isBlock := p.(map[string]any)["ipBlock"]; !isBlock {
					peers = append(peers, p)
				}
			}
			for _, c := range l {
				peers = append(peers, map[string]any{"ipBlock": map[string]any{"cidr": c}})
			}
			if len(peers) == 0 {
				peers = append(peers, peer("pods"))
				fair = false
			}
			r["to"] = peers
		}
		body = map[string]any{"spec": map[string]any{"egress": rules}}
		if m == honest {
			body["metadata"] = map[string]any{"annotations": map[string]any{poolRecord: strings.Join(record, ",")}}
		}
	default:
		l, ok := g.list(was["externalCIDRs"], true, m, 256)
		body, fair = map[string]any{"spec": map[string]any{"externalCIDRs": l}}, ok
		if m == honest {
			body["metadata"] = map[string]any{"annotations": map[string]any{poolRecord: strings.Join(recorded(was[poolRecord], was["externalCIDRs"], l), ",")}}
		}
	}
	b, _ := json.Marshal(body)
	return string(b), fair
}

// recorded is record grown by what the write turning was into is adds (as
// the writer records what it adds, and nothing that was there).
func recorded(record, was, is []string) []string {
	out := slices.DeleteFunc(trimmed(record), func(e string) bool { return e == "" })
	for _, e := range trimmed(is) {
		if e != "" && !slices.Contains(trimmed(was), e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// peer is a NetworkPolicy peer: an ipBlock, or all pods for "pods".
func peer(p string) map[string]any {
	if p == "pods" {
		return map[string]any{"podSelector": map[string]any{}}
	}
	return map[string]any{"ipBlock": map[string]any{"cidr": p}}
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}
