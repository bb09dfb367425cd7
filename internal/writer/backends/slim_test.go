package backends

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// padded is homePolicy following home, grown to about size bytes of JSON
// the way a tenant may grow it: rules of pod selectors (which the writer
// never reads), or distinct ipBlocks (which it does), and 200 KiB of
// annotations.
func padded(t *testing.T, size int, blocks bool) *unstructured.Unstructured {
	t.Helper()
	u := policy(t, homePolicy)
	u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home", "tenant/padding": strings.Repeat("x", 200<<10)})
	spec := u.Object["spec"].(map[string]any)
	ingress := spec["ingress"].([]any)
	for i, n := 0, jsonLen(t, u.Object); n < size; i++ {
		var peers []any
		for j := range 100 {
			if blocks {
				peers = append(peers, map[string]any{"ipBlock": map[string]any{"cidr": fmt.Sprintf("fd00:%x:%x::/64", i, j)}})
			} else {
				peers = append(peers, map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("app-%d-%d", i, j)}}})
			}
		}
		rule := map[string]any{"from": peers, "ports": []any{map[string]any{"port": int64(i)}}}
		ingress, n = append(ingress, rule), n+jsonLen(t, rule)+1
		spec["ingress"] = ingress
	}
	return u
}

func jsonLen(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestTheCacheKeepsOfAPolicyItsBlocksOnly: whatever a tenant puts in a
// NetworkPolicy that follows a DynamicPrefix, the cache keeps its identity,
// the annotations the writer reads and one ipBlock per distinct CIDR - which
// read as the same entries - and at most MaxKeptBytes of them; a policy
// whose CIDRs alone are more is kept as a mark that Decode reports too large
// (and that still names what it follows), so it is never written.
func TestTheCacheKeepsOfAPolicyItsBlocksOnly(t *testing.T) {
	k := NetworkPolicyKind()
	big := padded(t, 731<<10, false)
	full, _, err := k.Decode(big)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := k.Slim(big.DeepCopy())
	slim := o.(*unstructured.Unstructured)
	if n := jsonLen(t, slim.Object); n > 1<<10 {
		t.Errorf("a %d KiB policy with 2 CIDRs is cached as %d bytes, want at most 1 KiB", jsonLen(t, big.Object)>>10, n)
	}
	got, ours, err := k.Decode(slim)
	if !ours || err != nil || !slices.Equal(got.Entries, full.Entries) || got.Follow != full.Follow || got.Name != "lan" || got.Namespace != "home" {
		t.Errorf("the cached policy reads as %+v (ours %v, %v), want the entries %q", got, ours, err, full.Entries)
	}
	if _, has := slim.GetAnnotations()["tenant/padding"]; has {
		t.Error("an annotation the writer never reads is cached")
	}
	if again, _ := k.Slim(slim.DeepCopy()); !equality.Semantic.DeepEqual(again, slim) {
		t.Errorf("slimmed again (a list slims, then the informer): %v, want %v", again, slim)
	}

	many := padded(t, 731<<10, true)
	cidrs, _ := policyBlocks(many)
	o, _ = k.Slim(many)
	mark := o.(*unstructured.Unstructured)
	if n := jsonLen(t, mark.Object); n > 1<<10 {
		t.Errorf("a policy of %d CIDRs is cached as %d bytes", len(cidrs), n)
	}
	if _, ours, err := k.Decode(mark); !ours || !errors.Is(err, ErrTooLarge) {
		t.Errorf("a policy over the bound decodes as ours %v, %v; want ErrTooLarge", ours, err)
	}
	if dp, _ := k.Follows(mark); dp != "home" {
		t.Errorf("a policy over the bound follows %q, want home (to be reported there)", dp)
	}
	if again, _ := k.Slim(mark.DeepCopy()); !equality.Semantic.DeepEqual(again, mark) {
		t.Errorf("the mark slimmed again: %v, want %v", again, mark)
	}
}

// TestTheCacheKeepsAtMostMaxKeptBytesOfAnyFollower: of a pool kind whose
// entries are written back whole (a network set, a CIDR group), a follower
// is kept whole up to the bound and as a mark over it.
func TestTheCacheKeepsAtMostMaxKeptBytesOfAnyFollower(t *testing.T) {
	kinds, _ := CalicoNetworkSetKinds(servedList{"crd.projectcalico.org/v1": {"networksets"}})
	k := kinds[0]
	for _, tt := range []struct {
		name    string
		nets    int
		tooMany bool
	}{
		{"a few nets", 3, false},
		{"a megabyte of nets", 40_000, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var nets []any
			for i := range tt.nets {
				nets = append(nets, fmt.Sprintf("fd00:%x::/64", i))
			}
			o, _ := k.Slim(networkSet(map[string]string{dynamicprefix.AnnotationName: "home"}, nets))
			u := o.(*unstructured.Unstructured)
			if n := jsonLen(t, u.Object); n > MaxKeptBytes {
				t.Errorf("cached as %d bytes, more than %d", n, MaxKeptBytes)
			}
			got, _, err := k.Decode(u)
			if errors.Is(err, ErrTooLarge) != tt.tooMany || !tt.tooMany && len(got.Entries) != tt.nets {
				t.Errorf("decodes as %d entries, %v", len(got.Entries), err)
			}
		})
	}
}

// FuzzPolicySlim plays a tenant writing any spec into a NetworkPolicy that
// follows a DynamicPrefix: the cache keeps at most MaxKeptBytes of it (and
// its identity), and what it keeps reads as the same entries - or as too
// large, never as other entries.
func FuzzPolicySlim(f *testing.F) {
	f.Add([]byte(`{"ingress":[{"from":[{"ipBlock":{"cidr":"2001:db8:1::/64","except":["2001:db8:1::/120"]}},{"podSelector":{}}]}],"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}`))
	f.Add([]byte(`{"ingress":"not a list"}`))
	f.Add([]byte(`{"ingress":[{"from":[{"ipBlock":{"cidr":"2001:DB8::0/64"}},{"ipBlock":{"cidr":"2001:db8::/64"}}]}]}`))
	k := NetworkPolicyKind()
	f.Fuzz(func(t *testing.T, spec []byte) {
		u := policy(t, "  podSelector: {}")
		var s any
		if json.Unmarshal(spec, &s) != nil {
			return
		}
		u.Object["spec"] = s
		u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationManagedCIDRs: "2001:db8:1::/64"})
		want, _, wantErr := k.Decode(u)
		o, err := k.Slim(u.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim := o.(*unstructured.Unstructured)
		if n := jsonLen(t, slim.Object); n > MaxKeptBytes+1<<10 {
			t.Fatalf("cached as %d bytes", n)
		}
		got, ours, err := k.Decode(slim)
		if !ours || errors.Is(err, ErrTooLarge) {
			return
		}
		if (err != nil) != (wantErr != nil) || !slices.Equal(got.Entries, want.Entries) || !slices.Equal(got.Record.Entries, want.Record.Entries) {
			t.Fatalf("cached, reads as %q (%v), want %q (%v)", got.Entries, err, want.Entries, wantErr)
		}
	})
}
