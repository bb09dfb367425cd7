package backends

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// pool is a CiliumLoadBalancerIPPool named name with annotations ann and
// blocks.
func pool(name string, ann map[string]string, blocks ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": name, "resourceVersion": "1"},
		"spec":     map[string]any{"blocks": blocks},
	}}
	u.SetAnnotations(ann)
	return u
}

// TestACacheHoldsEachPoolReadOnce: what goes into a pool cache is read there
// (Kind.Read, the informer's transform), once; a pass finds the followers of
// a DynamicPrefix by the index, each with what it follows, its entries and
// our record, or why it cannot be read - and reads none of them again.
func TestACacheHoldsEachPoolReadOnce(t *testing.T) {
	k := poolKind()
	c := Cached{Kind: k, Store: NewCache(k)}
	objects := []*unstructured.Unstructured{
		pool("lb", map[string]string{dynamicprefix.AnnotationName: "home", dynamicprefix.AnnotationAddressRange: "lb",
			k.RecordKey: "2001:db8:a::/64"},
			map[string]any{"cidr": "192.0.2.0/24"}, map[string]any{"cidr": "2001:db8:a::/64"}),
		pool("garbled", map[string]string{dynamicprefix.AnnotationName: "home"}, "not a block"),
		pool("other", map[string]string{dynamicprefix.AnnotationName: "away"}),
		pool("users", nil, map[string]any{"cidr": "198.51.100.0/24"}),
	}
	before := Decoded()
	for _, u := range objects {
		if err := c.Store.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	if n := Decoded() - before; n != int64(len(objects)) {
		t.Errorf("adding %d objects read %d, want each once", len(objects), n)
	}

	before = Decoded()
	type follower struct {
		Name, Subnet, AddressRange string
		Entries, Record            []string
		Ours, Garbled              bool
	}
	var got []follower
	for range 3 {
		got = nil
		for _, p := range c.Following("home") {
			got = append(got, follower{p.Name, p.Follow.Subnet, p.Follow.AddressRange, p.Entries, p.Record.Entries, p.Ours, p.Err != nil})
		}
	}
	want := []follower{
		{Name: "garbled", Ours: true, Garbled: true},
		{Name: "lb", AddressRange: "lb", Entries: []string{"192.0.2.0/24", "2001:db8:a::/64"}, Record: []string{"2001:db8:a::/64"}, Ours: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("followers of home (-want +got):\n%s", diff)
	}
	if n := Decoded() - before; n != 0 {
		t.Errorf("looking the followers up 3 times read %d objects, want 0", n)
	}
	if users, ok := c.Get("users"); !ok || users.Ours || users.Live.GetName() != "users" {
		t.Errorf("a pool following nothing: %+v, want kept as its identity, not ours", users)
	}
	if away := c.Following("away"); len(away) != 1 || away[0].Name != "other" {
		t.Errorf("followers of away: %v, want other", away)
	}
}

// TestAPoolTooLargeIsReadAsSuch: a follower over MaxKeptBytes is kept as a
// mark that still names what it follows, and reads as too large.
func TestAPoolTooLargeIsReadAsSuch(t *testing.T) {
	k := NetworkPolicyKind()
	o, err := k.Read(padded(t, 731<<10, true))
	if err != nil {
		t.Fatal(err)
	}
	p := o.(*Pool)
	if !errors.Is(p.Err, ErrTooLarge) || p.Follow.DynamicPrefix != "home" || !p.Ours {
		t.Errorf("read as ours %v, following %q, %v; want ours, following home, too large", p.Ours, p.Follow.DynamicPrefix, p.Err)
	}
	if again, _ := k.Read(p); again != any(p) {
		t.Errorf("a Pool read again became %T, want it unchanged", again)
	}
}
