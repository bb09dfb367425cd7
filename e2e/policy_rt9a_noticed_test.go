package e2e

// What the ninth red team (r9a) noticed a stolen writer token can still
// write, and did not test: the L2 announcer's nudge record on a Service, the
// existing operator's finalizer on a DynamicPrefix, and the times of a
// DynamicPrefix's status.history. Each test plays the token's write through
// the shipped policies on the real API server and then what the honest
// writer makes of it.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// TestATokensNudgeRecordWithholdsNoNudge: on a Cilium older than v1.20.1
// the L2 announcer never announces an address added to an existing Service
// until the Service is touched again; the writer touches it once its load
// balancer publishes an address of ours that dynamic-prefix.io/l2-nudged
// (the addresses published at the last touch) does not name
// (render.Nudged). At a renumbering the status names the new prefix before
// any object holds it, so the token knows web's next address (its suffix on
// that prefix) before the load balancer does, and writes it into the
// record ahead of time: the writer then reads the new address as nudged
// already, and nothing touches web after it is published - on such a
// Cilium web is never announced on its new address, and once the old one
// drains, on none. Admitted before: no policy held the record.
//
// Held: renumber-writer-services admits an address into l2-nudged only
// while the Service's load balancer publishes it (status.loadBalancer
// .ingress, which the writer cannot write), so the write that names it is
// itself a touch after the publication. Taking entries out stays admitted:
// it costs one more nudge, never a missing one.
func TestATokensNudgeRecordWithholdsNoNudge(t *testing.T) {
	s := stealWriterToken(t, nil)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationSuffix: "::ffff:0:1", holdings.AnnotationSkipDNS: "true"})
	dp, err := api.FromUnstructured(s.read(t, api.GVR, "", "home"))
	if err != nil {
		t.Fatal(err)
	}
	m := model.Parse("home", dp.Spec)
	const oldAddr, newAddr = "2001:db8:2::ffff:0:1", "2001:db8:1::ffff:0:1"
	// pass is the writer's pass over web on a Cilium that needs the nudge
	// (apply.Writer.Services): whether it wrote.
	pass := func(what string, pooled []netip.Prefix) bool {
		t.Helper()
		svc, err := s.w.API.Client.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ingress []string
		for _, i := range svc.Status.LoadBalancer.Ingress {
			ingress = append(ingress, i.IP)
		}
		live := holdings.Live(svc.Annotations, holdings.DefaultTargetKeys)
		got, err := render.Service(m, holdings.ServiceFollowOf(svc.Annotations), pooled, live, render.Served{Self: "default/web", Ingress: ingress},
			render.ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, L2Nudge: true, Managed: homeManaged})
		if err != nil {
			t.Fatalf("%s: rendering: %v", what, err)
		}
		if got.Equal(live) {
			return false
		}
		patch := jsonOf(t, map[string]any{"metadata": map[string]any{"annotations": got.Patch(live)}})
		if err := s.patch(serviceGVR, "default", "web", patch); err != nil {
			t.Fatalf("%s: the writer's write refused: %v\n(the writer's %s)", what, err, patch)
		}
		return true
	}
	nudged := func() []string {
		return holdings.Split(s.read(t, serviceGVR, "default", "web").GetAnnotations()[holdings.AnnotationL2Nudged])
	}

	// web follows 2001:db8:2::/64 (pooled alone), its address published
	// and nudged.
	pass("the writer's first pass", homeManaged[1:2])
	publish(t, s.w, "web", oldAddr)
	if !pass("the writer's pass after the load balancer published "+oldAddr, homeManaged[1:2]) || !slices.Equal(nudged(), []string{oldAddr}) {
		t.Fatalf("web not nudged on its first published address: %v", nudged())
	}

	// The renumbering: the status names 2001:db8:1::/64 current (home's
	// status names it already), and the token names web's address there
	// nudged before any object holds it.
	if err := s.annotate("default", "web", map[string]any{holdings.AnnotationL2Nudged: oldAddr + "," + newAddr}); err != nil {
		t.Logf("the token's nudge record naming %s before it is published refused (held): %v", newAddr, err)
	} else {
		t.Errorf("the token named %s nudged on web before the load balancer published it: admitted", newAddr)
	}
	pooled := homeManaged[:2]
	pass("the writer's pass at the renumbering", pooled)
	publish(t, s.w, "web", newAddr, oldAddr)
	if !pass("the writer's pass after the load balancer published "+newAddr, pooled) {
		t.Errorf("the load balancer published %s and nothing touched web after it (nudge record %v): "+
			"Cilium's L2 announcer before v1.20.1 never announces it", newAddr, nudged())
	}
	// Entries taken out of the record cost a nudge more, never one less.
	if err := s.annotate("default", "web", map[string]any{holdings.AnnotationL2Nudged: nil}); err != nil {
		t.Errorf("the nudge record removed: %v", err)
	}
	if !pass("the writer's pass after the record was removed", pooled) || !slices.Equal(nudged(), []string{newAddr, oldAddr}) {
		t.Errorf("after the nudge record was removed web was not nudged again: %v", nudged())
	}
}

// TestADynamicPrefixDeletedWhileTheWriterIsDownIsReleasedWithoutItsFinalizer:
// the existing operator's finalizer holds a DynamicPrefix it reconciled
// while its delete path releases what it wrote; renumber adds none of its
// own, and removes that one once its own release is written
// (renumber-writer-dynamicprefixes admits the writer nothing else on a
// DynamicPrefix). A stolen token removes it too - nothing in the request
// tells its removal from the honest writer's, whose release is written to
// other objects the policy cannot see - so a DynamicPrefix deleted while
// the writer is down goes at once, before any release. What the user must
// not be left with is what the release would have taken out: the writer
// that starts next finds the objects that still follow the name (every
// Service and pool is read at the start of a term) and releases them from
// there, the finalizer or not - web keeps the user's 192.0.2.7 alone, the
// CIDR group its user's block. From a DynamicPrefix that is not being
// deleted the honest writer never removes it: refused there (admitted
// before).
func TestADynamicPrefixDeletedWhileTheWriterIsDownIsReleasedWithoutItsFinalizer(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["`+dynamicprefix.Finalizer+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationSkipDNS: "true", holdings.AnnotationIPs: "192.0.2.7"})
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "home-net", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")
	addr, err := model.Splice(prefixA, netip.MustParseAddr("::ffff:0:1"))
	if err != nil {
		t.Fatal(err)
	}
	ips := func() string {
		s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Annotations[holdings.AnnotationIPs]
	}
	eventually(t, "web and the CIDR group follow A", func() (bool, string) {
		got, group := ips(), cidrs(t, w, "home-net")
		return got == "192.0.2.7,"+addr.String() && slices.Equal(group, []string{"198.51.100.0/24", prefixA.String()}), got + " " + fmt.Sprint(group)
	})
	w.Stop(writer, 10*time.Second)

	// The honest writer removes the finalizer only from a DynamicPrefix
	// being deleted; from one that lives it is the existing operator's
	// (after a way back, its delete path needs it).
	id, err := w.API.ServiceAccountIn(ctx, world.Namespace, "renumber-writer", "")
	if err != nil {
		t.Fatal(err)
	}
	token := dynamic.NewForConfigOrDie(id.Config)
	unfinalize := func() error {
		_, err := token.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	}
	if err := unfinalize(); !denied(err) {
		t.Errorf("the token's removal of the finalizer from home, which is not being deleted: %s", errString(err))
	}
	if err := w.API.Dynamic.Resource(api.GVR).Delete(ctx, "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u, err := w.API.Dynamic.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{}); err != nil || u.GetDeletionTimestamp() == nil {
		t.Fatalf("home deleted with the existing operator's finalizer is not held: %v", err)
	}
	if err := unfinalize(); err != nil {
		t.Fatalf("the token's removal of the finalizer while home is being deleted (as the honest writer's): %v", err)
	}
	eventually(t, "home is gone", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(api.GVR).Get(ctx, "home", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if got, group := ips(), cidrs(t, w, "home-net"); !strings.Contains(got, addr.String()) || !slices.Contains(group, prefixA.String()) {
		t.Fatalf("released before any writer ran: web %q, CIDR group %v", got, group)
	}

	startWriter(t, w, "writer-b")
	eventually(t, "the next writer releases web and the CIDR group: the user's entries alone", func() (bool, string) {
		got, group := ips(), cidrs(t, w, "home-net")
		return got == "192.0.2.7" && slices.Equal(group, []string{"198.51.100.0/24"}), got + " " + fmt.Sprint(group)
	})
}
