package e2e

// The eighth red team (r8) against s29-records: what the record checks of
// renumber-writer-services admit that the honest writer then reads as its
// own.

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestRT8ATokenMirrorsNoTargetOfTheWritersUnderAKeyItDoesNotManage: the
// writer runs with --target-keys external-dns.alpha.kubernetes.io/target
// (docs/migrating.md: for the existing operator before v0.0.18), so its
// DNS target T goes under the alpha key alone, recorded. The stolen token
// copies T under external-dns.kubernetes.io/target, which external-dns
// reads too: admitted, by renumber-writer-services' exception for "a
// target the user holds under another target key", which does not ask
// whether the record names it (the writer's, not the user's). The honest
// writer never touches a key outside its keys and its keys record
// (render.targets), so after the prefix moves T stays there for good:
// web's name keeps answering an address that is no longer web's.
func TestRT8ATokenMirrorsNoTargetOfTheWritersUnderAKeyItDoesNotManage(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"})
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	keys := []string{holdings.AnnotationTargetAlpha}
	pass := func(what string, pooled []netip.Prefix) {
		t.Helper()
		ann := s.read(t, serviceGVR, "default", "web").GetAnnotations()
		live := holdings.Live(ann, keys)
		got, err := render.Service(m, holdings.ServiceFollowOf(ann), pooled, live, render.Served{},
			render.ServiceOptions{TargetKeys: keys, Managed: homeManaged})
		if err != nil {
			t.Fatalf("%s: rendering: %v", what, err)
		}
		if got.Equal(live) {
			return
		}
		patch := jsonOf(t, map[string]any{"metadata": map[string]any{"annotations": got.Patch(live)}})
		if err := s.patch(serviceGVR, "default", "web", patch); err != nil {
			t.Errorf("%s: the writer's write refused: %v\n(the writer's %s)", what, err, patch)
		}
	}
	const old = "2001:db8:1::ffff:0:1"
	pass("the writer's first pass", homeManaged[:1])
	if err := s.annotate("default", "web", map[string]any{holdings.AnnotationTarget: old}); err != nil {
		t.Logf("the token's mirror refused (held): %v", err)
	} else {
		t.Errorf("the token copied the writer's target %s under %s, a key the writer does not manage: admitted", old, holdings.AnnotationTarget)
	}
	// The prefix moves on: 2001:db8:2::/64 pooled alone.
	pass("the writer's pass after the move", homeManaged[1:2])
	for k, v := range s.read(t, serviceGVR, "default", "web").GetAnnotations() {
		if strings.HasSuffix(k, "/target") && slices.Contains(strings.Split(v, ","), old) {
			t.Errorf("after the move %s still names %s, an address no longer web's: %q", k, old, v)
		}
	}
}

// TestRT8ATokenRecordsNoUsersEntryByCopyingItUnderTheOtherAddressKey: the
// record names the writer's entries under every address key (render.addresses,
// since s29-records), and renumber-writer-services lets the record grow by
// an entry "the same write adds" to any address key. The user's Service
// follows home and holds 2001:db8:bad::5 of its own under
// lbipam.cilium.io/ips. The stolen token copies it under
// kube-vip.io/loadbalancerIPs - an entry that key did not hold, so "added" -
// and names it in managed-ips: admitted (the value policy reads the
// status the token forged, as in F1; on 1.30, without
// renumber-writer-values, any entry, the user's IPv4 192.0.2.7 too).
// The honest writer then owns it under every key and takes it out of
// lbipam.cilium.io/ips: admitted, as the record named it before. The
// user's address is gone for good (r6b F4's harm, by one more write).
func TestRT8ATokenRecordsNoUsersEntryByCopyingItUnderTheOtherAddressKey(t *testing.T) {
	s := stealWriterToken(t, nil)
	const user = "2001:db8:bad::5"
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationIPs: "192.0.2.7," + user, holdings.AnnotationManagedIPs: ""})
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	pass := func(what string) {
		t.Helper()
		ann := s.read(t, serviceGVR, "default", "web").GetAnnotations()
		live := holdings.Live(ann, holdings.DefaultTargetKeys)
		got, err := render.Service(m, holdings.ServiceFollowOf(ann), homeManaged[:1], live, render.Served{},
			render.ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Managed: homeManaged})
		if err != nil {
			t.Fatalf("%s: rendering: %v", what, err)
		}
		if got.Equal(live) {
			return
		}
		patch := jsonOf(t, map[string]any{"metadata": map[string]any{"annotations": got.Patch(live)}})
		if err := s.patch(serviceGVR, "default", "web", patch); err != nil {
			t.Logf("%s: the writer's write refused: %v", what, err)
		} else {
			t.Logf("%s: the writer's %s admitted", what, patch)
		}
	}
	pass("the writer's first pass")
	forged := `{"status":{"currentPrefix":"2001:db8:bad::/64","history":[` +
		`{"prefix":"2001:db8:bad::/64","state":"active","acquiredAt":"2026-11-29T08:00:00Z"},` +
		`{"prefix":"2001:db8:1::/64","state":"draining","deprecatedAt":"2026-11-29T08:00:00Z"},` +
		`{"prefix":"2001:db8:2::/64","state":"draining"},{"prefix":"2001:db8:3::/64","state":"expired"}]}}`
	if err := s.patch(api.GVR, "", "home", forged, "status"); err != nil {
		t.Fatalf("the token's status naming 2001:db8:bad::/64 current: %v", err)
	}
	ann := s.read(t, serviceGVR, "default", "web").GetAnnotations()
	var last error
	eventually(t, "the value policy reads the forged status", func() (bool, string) {
		last = s.annotate("default", "web", map[string]any{
			holdings.AnnotationKubeVIPIPs: user,
			holdings.AnnotationManagedIPs: strings.TrimPrefix(ann[holdings.AnnotationManagedIPs]+","+user, ","),
		})
		return last == nil || !strings.Contains(errString(last), "renumber-writer-values"), errString(last)
	})
	if last != nil {
		t.Logf("the token's copy refused (held): %v", last)
	} else {
		t.Logf("the token's copy admitted: %v", s.read(t, serviceGVR, "default", "web").GetAnnotations())
	}
	if _, err := s.w.API.Dynamic.Resource(api.GVR).Patch(t.Context(), "home", types.MergePatchType, []byte(`{"status":{"currentPrefix":"2001:db8:1::/64","history":[`+
		`{"prefix":"2001:db8:1::/64","state":"active"},{"prefix":"2001:db8:2::/64","state":"draining"},`+
		`{"prefix":"2001:db8:3::/64","state":"expired"}]}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the status put back: %v", err)
	}
	pass("the writer's pass after the token's write")
	if ips := strings.Split(s.read(t, serviceGVR, "default", "web").GetAnnotations()[holdings.AnnotationIPs], ","); !slices.Contains(ips, user) {
		t.Errorf("the user's %s taken off the Service by the honest writer, after the token copied it under %s and recorded it: %v", user, holdings.AnnotationKubeVIPIPs, ips)
	}
}
