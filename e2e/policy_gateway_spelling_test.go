package e2e

// The eighth red team's F1 on a Gateway: an entry the stolen token adds in
// another spelling than the writer's canonical one, and records in that
// spelling (TestARespelledEntryTheTokenRecordsStallsNoWrite, for the kind
// s30-spelling left reading by value).

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestARespelledGatewayEntryTheTokenRecordsStallsNoWrite: the property of
// TestARespelledEntryTheTokenRecordsStallsNoWrite on Gateways - whatever a
// write of the stolen token's that renumber-writer-gateways admits leaves
// on a Gateway that follows a DynamicPrefix, the honest writer's next
// write to it is admitted and no user entry is lost. The policy compares a
// Gateway's entries as text (s30-gwrecords): 2001:DB8:2::5 is an address
// no place held, even beside the user's 2001:db8:2::5, so the token may add
// it to spec.addresses and the infrastructure annotation and record it.
// Each case is one Gateway following home (suffix ::ffff:0:1), with the
// user's entry in some spelling in spec.addresses and the infrastructure
// annotation, and the token's respelled copy of it (or of the writer's own
// address) added and recorded. After the token's write, the writer's pass
// with home's status as it stands (2001:db8:1::/64 current,
// 2001:db8:2::/64 draining) and its pass after the drain are admitted, the
// user's entry, as the user spelled it, is still there, and the token's is
// gone.
func TestARespelledGatewayEntryTheTokenRecordsStallsNoWrite(t *testing.T) {
	s := stealWriterToken(t, nil)
	if err := s.w.API.InstallGatewayAPI(s.ctx); err != nil {
		t.Fatal(err)
	}
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	k := backends.GatewayKind("v1")
	type gateway struct {
		name, user, token, mine string // mine: the writer's entry the token replaces
	}
	cases := []gateway{
		{name: "upper", user: "2001:db8:2::5", token: "2001:DB8:2::5"},
		{name: "zeros", user: "2001:db8:2::5", token: "2001:db8:2:0::5"},
		{name: "users-upper", user: "2001:DB8:2::5", token: "2001:db8:2::5"},
		{name: "own", user: "192.0.2.9", token: "2001:DB8:2::FFFF:0:1", mine: "2001:db8:2::ffff:0:1"},
	}
	ips := func(name string) (addresses, infra []string) {
		u := s.read(t, gatewayGVR, "default", name)
		list, _, _ := unstructured.NestedSlice(u.Object, "spec", "addresses")
		for _, a := range list {
			addresses = append(addresses, fmt.Sprint(a.(map[string]any)["value"]))
		}
		v, _, _ := unstructured.NestedString(u.Object, "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
		return addresses, holdings.Split(v)
	}
	// pass is the honest writer's write of the Gateway as it is now (nil:
	// nothing to write), rendered by the real packages as apply's
	// patchPool renders it.
	pass := func(name string, pooled []netip.Prefix) map[string]any {
		t.Helper()
		u := s.read(t, gatewayGVR, "default", name)
		po, _, err := k.Decode(u)
		if err != nil {
			t.Fatalf("%s: decoding: %v", name, err)
		}
		w, err := render.Pool(m, po.Held, pooled, homeManaged, k.ClaimExact)
		if err != nil {
			t.Fatalf("%s: rendering: %v", name, err)
		}
		if w.Holds {
			return nil
		}
		spec, err := k.Place(u, w.Owned, w.Record, false)
		if err != nil {
			t.Fatalf("%s: placing: %v", name, err)
		}
		ann := k.Annotate(u, w.Owned, w.Record, false)
		ann[k.RecordKey] = w.Value
		return map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": spec}
	}
	for _, c := range cases {
		apply(t, s.w, gatewayGVR, gatewayAt(c.name, map[string]any{holdings.AnnotationSuffix: "::ffff:0:1", holdings.AnnotationManagedIPs: ""},
			[]string{c.user}, c.user))
		write := func(what string, pooled []netip.Prefix) {
			t.Helper()
			patch := pass(c.name, pooled)
			if patch == nil {
				return
			}
			if err := s.patch(gatewayGVR, "default", c.name, jsonOf(t, patch)); err != nil {
				t.Errorf("Gateway %s: the writer's %s refused: %v\n(the Gateway: %s)\n(the writer's %s)", c.name, what, err,
					jsonOf(t, s.read(t, gatewayGVR, "default", c.name).Object["metadata"].(map[string]any)["annotations"]), jsonOf(t, patch))
			}
			if addresses, infra := ips(c.name); !slices.Contains(addresses, c.user) || !slices.Contains(infra, c.user) {
				t.Errorf("Gateway %s: after the writer's %s the user's %s is gone: spec.addresses %v, infrastructure %v", c.name, what, c.user, addresses, infra)
			}
		}
		write("first pass", homeManaged[:2])
		// The token: its respelled entry added to spec.addresses and the
		// infrastructure annotation, and recorded.
		u := s.read(t, gatewayGVR, "default", c.name)
		addresses, infra := ips(c.name)
		drop := func(l []string) []string {
			return slices.DeleteFunc(slices.Clone(l), func(e string) bool { return c.mine != "" && e == c.mine })
		}
		record := drop(holdings.Split(u.GetAnnotations()[holdings.AnnotationManagedIPs]))
		ann := map[string]any{holdings.AnnotationManagedIPs: strings.Join(append(record, c.token), ",")}
		if c.mine != "" { // the writer's own address, respelled in its DNS targets too
			for _, key := range holdings.DefaultTargetKeys {
				ann[key] = strings.Join(append(drop(holdings.Split(u.GetAnnotations()[key])), c.token), ",")
			}
		}
		token := gatewayWrite(t, ann, append(drop(addresses), c.token), strings.Join(append(drop(infra), c.token), ","))
		if err := s.patch(gatewayGVR, "default", c.name, token); err != nil {
			t.Logf("Gateway %s: the token's respelled entry refused (held): %v", c.name, err)
		} else {
			t.Logf("Gateway %s: the token's respelled entry admitted", c.name)
		}
		write("pass after the token's write", homeManaged[:2])
		write("pass after the drain", homeManaged[:1])
		u = s.read(t, gatewayGVR, "default", c.name)
		if held := jsonOf(t, []any{u.GetAnnotations(), u.Object["spec"]}); strings.Contains(held, c.token) {
			t.Errorf("Gateway %s: the token's %s, which the record named, is still there after the drain: %s", c.name, c.token, held)
		}
		t.Logf("Gateway %s: %v %v", c.name, u.GetAnnotations(), u.Object["spec"])
	}
}
