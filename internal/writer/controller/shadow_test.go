package controller

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
)

// shadow is a dry-run controller over the fixture's caches and clients, next
// to its leader f.ctl.
func (f *fixture) shadow(targetKeys []string) (*Controller, *permit.Plan) {
	p := permit.NewPlan(slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := NewController(Config{Budget: generous, TargetKeys: targetKeys, Plan: p}, f, f.votes, f.dyn, f.meta, f.clock,
		slog.New(slog.NewTextHandler(io.Discard, nil)), &recorder{})
	return c, p
}

// shadowSync runs one shadow pass and returns the API writes it made.
func (f *fixture) shadowSync(c *Controller, key Key) []string {
	f.t.Helper()
	leader := f.ctl
	defer func() { f.ctl = leader }()
	f.ctl = c
	return f.sync(key)
}

func fields(cs []permit.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Object+" "+c.Field)
	}
	return out
}

func TestAShadowPlansTheLeadersWritesAndMakesNone(t *testing.T) {
	f := converged(t, generous)
	shadow, p := f.shadow(holdings.DefaultTargetKeys)
	if got := f.shadowSync(shadow, passHome); len(got) != 0 || len(p.Changes()) != 0 {
		t.Fatalf("converged: the shadow wrote %q and plans %v", got, p.Changes())
	}

	f.report(3, prefixB, prefixA)
	if got := f.shadowSync(shadow, passHome); len(got) != 0 {
		t.Fatalf("the shadow wrote %q", got)
	}
	want := []string{
		"ciliumloadbalancerippools/lb metadata.annotations." + dynamicprefix.AnnotationManagedBlock,
		"ciliumloadbalancerippools/lb spec entries",
		"dynamicprefixes/home status.addressRanges",
		"dynamicprefixes/home status.conditions",
		"dynamicprefixes/home status.currentPrefix",
		"dynamicprefixes/home status.history",
		"services/default/web metadata.annotations." + holdings.DefaultTargetKeys[0],
		"services/default/web metadata.annotations." + holdings.DefaultTargetKeys[1],
		"services/default/web metadata.annotations." + holdings.AnnotationIPs,
		"services/default/web metadata.annotations." + holdings.AnnotationManagedIPs,
		"services/default/web metadata.annotations." + holdings.AnnotationManagedTarget,
	}
	slices.Sort(want)
	got := p.Changes()
	if !slices.Equal(fields(got), want) {
		t.Errorf("planned\n%q\nwant\n%q", fields(got), want)
	}
	for _, c := range got {
		if c.Field == "status.currentPrefix" && (c.From != `"`+prefixA+`"` || c.To != `"`+prefixB+`"`) {
			t.Errorf("currentPrefix planned %s", c)
		}
		if c.Field == "spec entries" && c.To != "192.0.2.0/24,"+rangeOn(prefixB)+","+rangeOn(prefixA) {
			t.Errorf("pool planned %s", c)
		}
	}

	// The same pass again plans the same, and still writes nothing.
	if f.shadowSync(shadow, passHome); !slices.Equal(p.Changes(), got) {
		t.Errorf("a second pass changed the plan to %v", p.Changes())
	}
	// Once the leader wrote it, the shadow agrees: the plan is empty.
	f.sync(passHome)
	f.catchUp()
	if got := f.shadowSync(shadow, passHome); len(got) != 0 || len(p.Changes()) != 0 {
		t.Errorf("after the leader's pass the shadow wrote %q and plans %v", got, p.Changes())
	}
}

// A shadow configured differently from the leader plans exactly the
// difference: here, one DNS target key fewer.
func TestAShadowShowsADisagreementAsExactlyThatDifference(t *testing.T) {
	f := converged(t, generous)
	shadow, p := f.shadow(holdings.DefaultTargetKeys[1:])
	f.shadowSync(shadow, passHome)
	got := p.Changes()
	want := []string{
		"services/default/web metadata.annotations." + holdings.DefaultTargetKeys[0],
		"services/default/web metadata.annotations." + holdings.AnnotationManagedTargetKeys,
	}
	slices.Sort(want)
	if !slices.Equal(fields(got), want) {
		t.Fatalf("planned %v, want %q", got, want)
	}
	for _, c := range got {
		if c.Object+" "+c.Field == want[1] && (c.From == "" || c.To != "") {
			t.Errorf("the dropped key should be planned removed: %s", c)
		}
	}
}

// The new kinds are planned as the others are: a shadow plans a
// NetworkPolicy's new ipBlocks (the allow-list first) and writes nothing.
func TestAShadowPlansANetworkPolicyAndWritesNothing(t *testing.T) {
	f := converged(t, generous)
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "lan", "namespace": "default", "resourceVersion": "1",
			"annotations": map[string]any{dynamicprefix.AnnotationName: "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{"from": []any{
			map[string]any{"ipBlock": map[string]any{"cidr": prefixA}},
			map[string]any{"ipBlock": map[string]any{"cidr": "192.168.1.0/24"}},
		}}}},
	}}
	kind := backends.NetworkPolicyKind()
	store := backends.NewCache(kind)
	if err := store.Add(np); err != nil {
		t.Fatal(err)
	}
	f.allowLists = []backends.Cached{{Kind: kind, Store: store}}
	shadow, p := f.shadow(holdings.DefaultTargetKeys)

	f.report(3, prefixB, prefixA)
	if got := f.shadowSync(shadow, passHome); len(got) != 0 {
		t.Fatalf("the shadow wrote %q", got)
	}
	var planned []string
	for _, c := range p.Changes() {
		if strings.HasPrefix(c.Object, "networkpolicies/") {
			planned = append(planned, c.Object+" "+c.Field+": "+c.From+" -> "+c.To)
		}
	}
	want := []string{
		"networkpolicies/default/lan metadata.annotations." + dynamicprefix.AnnotationManagedCIDRs + ":  -> " + prefixB + "," + prefixA,
		"networkpolicies/default/lan spec entries: " + prefixA + ",192.168.1.0/24 -> 192.168.1.0/24," + prefixB + "," + prefixA,
	}
	if !slices.Equal(planned, want) {
		t.Errorf("planned\n%q\nwant\n%q", planned, want)
	}
}
