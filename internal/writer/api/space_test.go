package api

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The space is every prefix a status names, expired history too; it grows
// (the Services are read again) only when it gains an address.
func TestTheSpaceIsWhatTheStatusesName(t *testing.T) {
	dp := func(current string, history ...string) any {
		var h []any
		for _, p := range history {
			h = append(h, map[string]any{"prefix": p, "state": "Expired", "delegatedPrefix": "2001:db8:c::/56"})
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
			"metadata": map[string]any{"name": "x"}, "status": map[string]any{"currentPrefix": current, "history": h}}}
	}
	p := netip.MustParsePrefix
	got := Space([]any{dp("2001:db8:b::/64", "2001:db8:a::/64"), dp("2001:db8:b::/64"), "not one"})
	want := []netip.Prefix{p("2001:db8:a::/64"), p("2001:db8:b::/64"), p("2001:db8:c::/56")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("space (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		was, now []netip.Prefix
		covers   bool
	}{
		{nil, want, true}, // unknown was everything
		{want, want[:1], true},
		{want, []netip.Prefix{p("2001:db8:c:1::/64")}, true},
		{want, []netip.Prefix{p("2001:db8:d::/64")}, false},
		{want, []netip.Prefix{p("2001:db8:c::/48")}, false},
	} {
		if got := Covers(tc.was, tc.now); got != tc.covers {
			t.Errorf("Covers(%v, %v) = %v", tc.was, tc.now, got)
		}
	}
}
