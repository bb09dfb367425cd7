package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"

	"github.com/renumber/renumber/internal/writer/prefix"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/tools/world"
)

// TestRotations renumbers again and again with maxPrefixHistory 2: which entries
// exist when, a prefix coming back, and twenty rotations that leave a user IPv4
// block, a Service's user address and hostname target in place with no growth.
func TestRotations(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	p := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x:100::/64", i)) }
	advertise := func(cur int, old ...int) {
		t.Helper()
		ads := []world.Advert{{Prefix: p(cur), Valid: 600 * time.Second, Preferred: 300 * time.Second}}
		for _, o := range old {
			ads = append(ads, world.Advert{Prefix: p(o), Valid: 600 * time.Second, Preferred: 0})
		}
		if err := w.Net.Router.Advertise(ctx, ads...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: p(1), Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{
		"transition": map[string]any{"mode": "ha", "maxPrefixHistory": 2},
	})
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}},
	})
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
		"dynamic-prefix.io/name": "home", service.AnnotationSuffix: "::1:2:3:4",
		service.AnnotationIPs: "192.0.2.7", service.AnnotationTarget: "web.example.org"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	// Twenty-five renumberings in about a minute are far beyond the default
	// write budget (burst 5, then 2/min per object), which would throttle them.
	startWriter(t, w, "writer-a", "--budget-object-burst", "60", "--budget-object-per-minute", "120")

	addr := func(i int) string {
		a, _ := prefix.Splice(p(i), netip.MustParseAddr("::1:2:3:4"))
		return a.String()
	}
	expect := func(what string, pooled ...int) {
		t.Helper()
		wantBlocks := []string{"192.0.2.0/24"}
		wantIPs := []string{"192.0.2.7"}
		for _, i := range pooled {
			wantBlocks = append(wantBlocks, p(i).String())
			wantIPs = append(wantIPs, addr(i))
		}
		wantTargets := []string{"web.example.org", addr(pooled[0])}
		eventually(t, what, func() (bool, string) {
			b := blocks(t, w, "lb")
			svc, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ips := service.Split(svc.Annotations[service.AnnotationIPs])
			targets := service.Split(svc.Annotations[service.AnnotationTarget])
			return slices.Equal(b, wantBlocks) && slices.Equal(ips, wantIPs) && slices.Equal(targets, wantTargets),
				fmt.Sprintf("blocks %v ips %v targets %v", b, ips, targets)
		})
	}
	// recent lists prefixes by when they were last current: the pools hold the
	// current one and the maxPrefixHistory (2) most recent others.
	var recent []int
	become := func(cur int, what string) {
		t.Helper()
		recent = append([]int{cur}, slices.DeleteFunc(recent, func(i int) bool { return i == cur })...)
		advertise(cur, recent[1:min(len(recent), 3)]...)
		expect(what, recent[:min(len(recent), 3)]...)
	}
	become(1, "A only")
	become(2, "B, A draining")
	become(3, "C, B, A draining")
	become(4, "D; maxPrefixHistory 2 drops A though still valid")
	become(3, "C comes back: reactivated, not duplicated")
	for i := 5; i < 25; i++ {
		become(i, fmt.Sprintf("rotation to %d", i))
	}
	settleWrites()
	m := mark(t, w)
	time.Sleep(60 * time.Second)
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, wr := range ws {
		if wr.Resource != "leases" {
			t.Errorf("write after the rotations settled: %s", wr)
		}
	}
}
