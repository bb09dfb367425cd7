package e2e

// The eighth red team's F1: an entry the stolen token adds in another
// spelling than the writer's canonical one, and records in that spelling.

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestARespelledEntryTheTokenRecordsStallsNoWrite (r8 F1). The property:
// whatever a write of the stolen token's that the policies admit leaves on
// an object that follows a DynamicPrefix, the honest writer's next write to
// that object is admitted, and no user entry is lost.
//
// The records rules (renumber-writer-services, -pools) compare entries as
// strings: 2001:DB8:2::5 is an entry no key held before, even beside the
// user's 2001:db8:2::5, so the token may add it and record it in that
// spelling. The writer compared entries canonically: reading the record it
// owned the user's 2001:db8:2::5 too and took it out with its own, and the
// API server refused every write of the writer's to that object from then
// on (an unrecorded removal). Each case below is one object, with the
// user's entry in some spelling and the token's respelled copy of it (or
// of the writer's own entry) added and recorded: under a Service's address
// key, its other address key and a DNS-target key; in a CIDR group, an
// LB-IPAM pool (its record spelled as block keys) and a NetworkPolicy
// rule. After the token's write, the writer's pass with home's status as it
// stands (2001:db8:1::/64 current, 2001:db8:2::/64 draining) and its pass
// after the drain (2001:db8:1::/64 alone) are admitted, the user's entry,
// as the user spelled it, is still there, and the token's, which the record
// names, is gone. Before (the writer owning by value) both passes were
// refused on every object but the one where the token respelled the
// writer's own entry; now the writer owns an entry only as its record
// spells it (holdings.Merge), as the policies read it.
func TestARespelledEntryTheTokenRecordsStallsNoWrite(t *testing.T) {
	s := stealWriterToken(t, nil)
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	kinds, err := backends.CiliumKinds(s.w.API.Client.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	kind := func(gvr schema.GroupVersionResource) *backends.Kind {
		for _, k := range append(kinds, backends.NetworkPolicyKind()) {
			if k.Resource == gvr.Resource {
				return k
			}
		}
		t.Fatalf("no kind %s", gvr.Resource)
		return nil
	}

	type object struct {
		gvr      schema.GroupVersionResource
		ns, name string
		user     string // the user's entry, as the user spells it
		// token is the token's write on the object as it is: an entry added
		// (or the writer's own replaced) and the record naming it, as the
		// token spells it.
		token func(u *unstructured.Unstructured) map[string]any
		// field lists what the user's entry is under, spelled as user is.
		field func(u *unstructured.Unstructured) []string
		gone  string // the token's entry: the record named it, so it goes
	}
	with := func(list, e string) string { return strings.TrimPrefix(list+","+e, ",") }
	// A Service following home with the user's entry under key, and the
	// token's entry added under add and recorded in rec (replacing the
	// writer's own entry mine, when set).
	service := func(name, key, user, add, rec, entry, mine string) object {
		createService(t, s.w, name, map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
			key: user, holdings.AnnotationManagedIPs: "", holdings.AnnotationManagedTarget: ""})
		return object{serviceGVR, "default", name, user, func(u *unstructured.Unstructured) map[string]any {
			ann := u.GetAnnotations()
			drop := func(l string) string {
				return strings.Join(slices.DeleteFunc(strings.Split(l, ","), func(e string) bool { return mine != "" && e == mine }), ",")
			}
			return map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				add: with(drop(ann[add]), entry), rec: with(drop(ann[rec]), entry)}}}
		}, func(u *unstructured.Unstructured) []string { return strings.Split(u.GetAnnotations()[key], ",") }, entry}
	}
	objects := []object{
		service("upper", holdings.AnnotationIPs, "2001:db8:2::5", holdings.AnnotationIPs, holdings.AnnotationManagedIPs, "2001:DB8:2::5", ""),
		service("zeros", holdings.AnnotationIPs, "2001:db8:2::5", holdings.AnnotationKubeVIPIPs, holdings.AnnotationManagedIPs, "2001:db8:2:0::5", ""),
		service("users-upper", holdings.AnnotationIPs, "2001:DB8:2::5", holdings.AnnotationIPs, holdings.AnnotationManagedIPs, "2001:db8:2::5", ""),
		service("target", holdings.AnnotationTarget, "2001:db8:2::5", holdings.AnnotationTarget, holdings.AnnotationManagedTarget, "2001:DB8:2::5", ""),
		// The writer's own address on the draining prefix, respelled in
		// the field and in the record.
		service("own", holdings.AnnotationIPs, "192.0.2.7", holdings.AnnotationIPs, holdings.AnnotationManagedIPs, "2001:DB8:2::FFFF:0:1", "2001:db8:2::ffff:0:1"),
	}
	// Pools: the user's 2001:db8:2:0:5::/80 beside the writer's entries,
	// and the token's respelled copy.
	const user, blocks = "2001:db8:2:0:5::/80", "dynamic-prefix.io/managed-blocks"
	record := func(u *unstructured.Unstructured, key, e string) map[string]any {
		return map[string]any{"annotations": map[string]any{key: with(u.GetAnnotations()[key], e)}}
	}
	apply(t, s.w, groupGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "grp", "annotations": map[string]any{"dynamic-prefix.io/name": "home", poolRecord: ""}},
		"spec":     map[string]any{"externalCIDRs": []any{user}}})
	cidrs := func(u *unstructured.Unstructured) []string {
		l, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "externalCIDRs")
		return l
	}
	objects = append(objects, object{groupGVR, "", "grp", user, func(u *unstructured.Unstructured) map[string]any {
		return map[string]any{"metadata": record(u, poolRecord, "2001:DB8:2:0:5::/80"),
			"spec": map[string]any{"externalCIDRs": append(cidrs(u), "2001:DB8:2:0:5::/80")}}
	}, cidrs, "2001:DB8:2:0:5::/80"})
	apply(t, s.w, poolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lan", "annotations": map[string]any{"dynamic-prefix.io/name": "home", blocks: ""}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": user}}}})
	objects = append(objects, object{poolGVR, "", "lan", user, func(u *unstructured.Unstructured) map[string]any {
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "blocks")
		return map[string]any{"metadata": record(u, blocks, "cidr=2001:db8:2:0:5:0:0:0/80"),
			"spec": map[string]any{"blocks": append(l, map[string]any{"cidr": "2001:db8:2:0:5:0:0:0/80"})}}
	}, func(u *unstructured.Unstructured) []string {
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "blocks")
		var out []string
		for _, b := range l {
			c, _ := b.(map[string]any)["cidr"].(string)
			out = append(out, c)
		}
		return out
	}, "2001:db8:2:0:5:0:0:0/80"})
	// A NetworkPolicy without a record whose egress rule follows home (it
	// names the current prefix: the writer's first write owns that block)
	// and holds the user's block too.
	apply(t, s.w, networkPolicyGVR, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": "egress", "namespace": "default", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec": map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Egress"},
			"egress": []any{map[string]any{"to": []any{peer("2001:db8:1::/64"), peer(user)}}}}})
	peers := func(u *unstructured.Unstructured) []any {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
		return rules[0].(map[string]any)["to"].([]any)
	}
	objects = append(objects, object{networkPolicyGVR, "default", "egress", user, func(u *unstructured.Unstructured) map[string]any {
		return map[string]any{"metadata": record(u, poolRecord, "2001:DB8:2:0:5::/80"),
			"spec": map[string]any{"egress": []any{map[string]any{"to": append(peers(u), peer("2001:DB8:2:0:5::/80"))}}}}
	}, func(u *unstructured.Unstructured) []string {
		var out []string
		for _, p := range peers(u) {
			c, _, _ := unstructured.NestedString(p.(map[string]any), "ipBlock", "cidr")
			out = append(out, c)
		}
		return out
	}, "2001:DB8:2:0:5::/80"})

	// pass is the honest writer's pass on the object as it is now: the patch
	// it makes (nil: nothing to write), rendered by the real packages as the
	// controller renders it.
	pass := func(o object, pooled []netip.Prefix) map[string]any {
		t.Helper()
		u := s.read(t, o.gvr, o.ns, o.name)
		if o.gvr == serviceGVR {
			ann := u.GetAnnotations()
			live := holdings.Live(ann, holdings.DefaultTargetKeys)
			got, err := render.Service(m, holdings.ServiceFollowOf(ann), pooled, live, render.Served{},
				render.ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: homeManaged})
			if err != nil {
				t.Fatalf("%s: rendering: %v", o.name, err)
			}
			if got.Equal(live) {
				return nil
			}
			return map[string]any{"metadata": map[string]any{"annotations": got.Patch(live)}}
		}
		k := kind(o.gvr)
		po, _, err := k.Decode(u)
		if err != nil {
			t.Fatalf("%s: decoding: %v", o.name, err)
		}
		w, err := render.Pool(m, po.Held, pooled, homeManaged, k.ClaimExact)
		if err != nil {
			t.Fatalf("%s: rendering: %v", o.name, err)
		}
		if w.Holds {
			return nil
		}
		var spec map[string]any
		if k.Place != nil {
			spec, err = k.Place(u, w.Owned, w.Record, false)
		} else {
			spec, err = k.Spec(po.Slot, w.Entries)
		}
		if err != nil {
			t.Fatalf("%s: placing: %v", o.name, err)
		}
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{k.RecordKey: w.Value}}, "spec": spec}
	}
	write := func(what string, o object, pooled []netip.Prefix) {
		t.Helper()
		patch := pass(o, pooled)
		if patch == nil {
			return
		}
		if err := s.patch(o.gvr, o.ns, o.name, jsonOf(t, patch)); err != nil {
			t.Errorf("%s %s: the writer's %s refused: %v\n(the object: %s)\n(the writer's %s)", o.gvr.Resource, o.name, what, err,
				jsonOf(t, s.read(t, o.gvr, o.ns, o.name).Object["metadata"].(map[string]any)["annotations"]), jsonOf(t, patch))
		}
		if got := o.field(s.read(t, o.gvr, o.ns, o.name)); !slices.Contains(got, o.user) {
			t.Errorf("%s %s: after the writer's %s the user's %s is gone: %v", o.gvr.Resource, o.name, what, o.user, got)
		}
	}
	for _, o := range objects {
		write("first pass", o, homeManaged[:2])
		if err := s.patch(o.gvr, o.ns, o.name, jsonOf(t, o.token(s.read(t, o.gvr, o.ns, o.name)))); err != nil {
			t.Logf("%s %s: the token's respelled entry refused (held): %v", o.gvr.Resource, o.name, err)
		} else {
			t.Logf("%s %s: the token's respelled entry admitted", o.gvr.Resource, o.name)
		}
		write("pass after the token's write", o, homeManaged[:2])
		write("pass after the drain", o, homeManaged[:1])
		u := s.read(t, o.gvr, o.ns, o.name)
		if held := jsonOf(t, []any{u.GetAnnotations(), u.Object["spec"]}); strings.Contains(held, o.gone) {
			t.Errorf("%s %s: the token's %s, which the record named, is still there after the drain: %s", o.gvr.Resource, o.name, o.gone, held)
		}
		t.Logf("%s %s: %v %v", o.gvr.Resource, o.name, u.GetAnnotations(), u.Object["spec"])
	}
}
