// Kubernetes NetworkPolicies whose ipBlock peers name the followed prefix.
// A NetworkPolicy annotated dynamic-prefix.io/name (optionally subnet or
// address-range, as CIDR groups take them) is an allow-list: each rule - an
// ingress rule's from, an egress rule's to - that holds one of our CIDRs is a
// following rule, and holds one ipBlock per pooled prefix. Everything else -
// the user's other peers, ports, rules, selectors - is never touched. The
// record is the existing operator's managed-cidrs: the CIDRs we wrote. On the
// first write, an ipBlock that is exactly what we would write (the current
// prefix, or its subnet or range) is ours: the user names it to say which
// rules follow. A policy with no such rule is a condition, never a write.
//
// except: an ipBlock we write carries the except list of the block it
// replaces, each entry moved to the same place in the new prefix (an except
// entry outside its block is dropped, as the API server would refuse it). A
// block kept across the pass keeps its except as it is.
//
// A rule whose peers would all go (its followed prefixes gone) would admit
// everyone - an empty from is "from anywhere" - so that write is refused with
// a condition; when the policy is released, such a rule keeps its blocks,
// which become the user's.

package backends

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

// NetworkPolicyResource is the NetworkPolicy resource.
const NetworkPolicyResource = "networkpolicies"

// NetworkPolicyKind is the kind of Kubernetes NetworkPolicies, served by
// every API server.
func NetworkPolicyKind() *Kind {
	return &Kind{
		Name: "NetworkPolicy", Resource: NetworkPolicyResource, Namespaced: true, AllowList: true,
		GVR:       schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: NetworkPolicyResource},
		RecordKey: dynamicprefix.AnnotationManagedCIDRs, Form: holdings.CIDRs, ClaimExact: true,
		Entries: func(u *unstructured.Unstructured, _ string) ([]string, error) { return policyBlocks(u) },
		Place:   placeBlocks,
		Kept:    keptBlocks,
	}
}

// keptBlocks is what the cache keeps of a policy's spec: one rule holding an
// ipBlock of each distinct CIDR, which reads as the same entries. The rest -
// other peers, ports, selectors, except lists, which rule holds what - is
// read from the live object when it is written (Place), so whoever may
// create a policy cannot make the cache hold more than its CIDRs. A spec
// that cannot be read is kept as it is, to be reported.
func keptBlocks(u *unstructured.Unstructured) any {
	cidrs, err := policyBlocks(u)
	if err != nil {
		return u.Object["spec"]
	}
	peers := make([]any, len(cidrs))
	for i, c := range cidrs {
		peers[i] = map[string]any{"ipBlock": map[string]any{"cidr": strings.Clone(c)}}
	}
	return map[string]any{"ingress": []any{map[string]any{"from": peers}}}
}

// policyRules are the two lists of rules and the field of each that holds
// its peers.
var policyRules = []struct{ rules, peers string }{{"ingress", "from"}, {"egress", "to"}}

// policyBlocks lists the distinct CIDRs of every ipBlock peer, in order.
func policyBlocks(u *unstructured.Unstructured) ([]string, error) {
	var out []string
	err := eachRule(u.Object, func(_ map[string]any, peers []any) error {
		for _, p := range peers {
			if cidr, _, ok := block(p); ok && !slices.Contains(out, cidr) {
				out = append(out, cidr)
			}
		}
		return nil
	})
	return out, err
}

// eachRule calls f with every rule of the policy and its peers.
func eachRule(obj map[string]any, f func(rule map[string]any, peers []any) error) error {
	for _, r := range policyRules {
		raw, found, err := unstructured.NestedFieldNoCopy(obj, "spec", r.rules)
		if err != nil {
			return err
		}
		if !found || raw == nil {
			continue
		}
		rules, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("spec.%s is %T, not a list", r.rules, raw)
		}
		for i, rule := range rules {
			m, ok := rule.(map[string]any)
			if !ok {
				return fmt.Errorf("spec.%s[%d] is %T, not a rule", r.rules, i, rule)
			}
			peers, _ := m[r.peers].([]any)
			if v, has := m[r.peers]; has && v != nil && peers == nil {
				return fmt.Errorf("spec.%s[%d].%s is %T, not a list", r.rules, i, r.peers, v)
			}
			if err := f(m, peers); err != nil {
				return err
			}
		}
	}
	return nil
}

// block reads an ipBlock peer: its CIDR, as spelled there (an entry is ours
// only in the spelling our record names: holdings.Merge), and except entries.
func block(peer any) (cidr string, except []string, ok bool) {
	p, _ := peer.(map[string]any)
	b, _ := p["ipBlock"].(map[string]any)
	c, _ := b["cidr"].(string)
	if c == "" {
		return "", nil, false
	}
	ex, _ := b["except"].([]any)
	for _, e := range ex {
		if s, ok := e.(string); ok {
			except = append(except, s)
		}
	}
	return strings.TrimSpace(c), except, true
}

// ErrRuleWouldOpen: a write would leave a following rule without peers, which
// admits everyone.
var ErrRuleWouldOpen = errors.New("a rule would be left without peers, which admits everyone")

// ErrNoRuleFollows: no rule of the policy holds an ipBlock of the followed
// prefix, so there is nowhere to write.
var ErrNoRuleFollows = errors.New("no rule holds an ipBlock of the followed prefix: name the current prefix (status.currentPrefix, or its subnet or range) in each rule that should follow")

// placeBlocks renders spec.ingress and spec.egress with the CIDRs in record
// in every following rule instead of those in owned.
func placeBlocks(live *unstructured.Unstructured, owned, record []string, release bool) (map[string]any, error) {
	obj := live.DeepCopy().Object
	ours := map[string]bool{}
	for _, o := range owned {
		ours[strings.TrimSpace(o)] = true
	}
	follow := map[string]bool{}
	for _, r := range record {
		follow[holdings.Canonical(r)] = true
	}
	var open []string
	var following int
	err := eachRule(obj, func(rule map[string]any, peers []any) error {
		if !slices.ContainsFunc(peers, func(p any) bool {
			c, _, ok := block(p)
			return ok && (ours[c] || follow[holdings.Canonical(c)])
		}) {
			return nil
		}
		following++
		kept, excepts := []any{}, map[string][]string{}
		var template string
		for _, p := range peers {
			c, ex, ok := block(p)
			if ok && ours[c] {
				c = holdings.Canonical(c)
				excepts[c] = ex
				if template == "" || len(record) > 0 && c == holdings.Canonical(record[0]) {
					template = c
				}
				continue
			}
			kept = append(kept, p)
		}
		for _, r := range record {
			c := holdings.Canonical(r)
			if slices.ContainsFunc(kept, func(p any) bool { k, _, ok := block(p); return ok && holdings.Canonical(k) == c }) {
				continue
			}
			ex, had := excepts[c]
			if !had {
				ex = moveExcept(excepts[template], template, c)
			}
			b := map[string]any{"cidr": r}
			if len(ex) > 0 {
				b["except"] = anys(ex)
			}
			kept = append(kept, map[string]any{"ipBlock": b})
		}
		if len(kept) == 0 {
			if release {
				return nil // stays as it is: the blocks become the user's
			}
			open = append(open, fmt.Sprint(peers))
			return nil
		}
		for _, r := range policyRules {
			if _, has := rule[r.peers]; has {
				rule[r.peers] = kept
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(open) > 0 {
		return nil, fmt.Errorf("%w: %w (peers %s)", model.ErrInvalid, ErrRuleWouldOpen, open[0])
	}
	if following == 0 && len(record) > 0 && !release {
		return nil, fmt.Errorf("%w: %w", model.ErrInvalid, ErrNoRuleFollows)
	}
	spec, _ := obj["spec"].(map[string]any)
	out := map[string]any{}
	for _, r := range policyRules {
		if v, has := spec[r.rules]; has {
			out[r.rules] = v
		}
	}
	return out, nil
}

// moveExcept moves except entries from inside the block from to the same
// places inside to (same length: the prefix bits replaced, as netmap does);
// entries outside from, or wider than it, are dropped.
func moveExcept(except []string, from, to string) []string {
	f, err1 := netip.ParsePrefix(from)
	t, err2 := netip.ParsePrefix(to)
	if err1 != nil || err2 != nil {
		return nil
	}
	var out []string
	for _, e := range except {
		p, err := netip.ParsePrefix(e)
		if err != nil || p.Bits() < f.Bits() {
			continue
		}
		if a, err := model.Map(model.MappingNetmap, p.Addr(), f, t); err == nil {
			out = append(out, netip.PrefixFrom(a, p.Bits()).String())
		}
	}
	return out
}
