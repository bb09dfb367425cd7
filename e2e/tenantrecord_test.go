package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// TestATenantsOwnRecordTakesNoAddress (issue 42 item 11, one tenant)
// plays TestAServiceThatHoldsItsAddressKeepsIt's forged-record case with a
// real tenant (a ServiceAccount whose Role covers Services in its namespace),
// the real writer and the shipped policies: the tenant of team, whose Service
// old is older than default/web, copies web's suffix onto old and, in the
// same patch, writes web's address into old's dynamic-prefix.io/managed-ips
// record. web must keep its address.
func TestATenantsOwnRecordTakesNoAddress(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	team := olderThanWeb(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	web := on(t, prefixA, "::ffff:0:1")
	ips := func(ns, name string) []string {
		s, err := w.API.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return holdings.Split(s.Annotations[holdings.AnnotationIPs])
	}
	eventually(t, "web holds "+web, func() (bool, string) {
		got := ips("default", "web")
		return slices.Contains(got, web), fmt.Sprint(got)
	})

	forgeRecord(t, team, "::ffff:0:1", web)
	claimsWeighed(t, w, func() bool { return slices.Contains(ips("default", "web"), web) })
	settleWrites()
	if got := ips("default", "web"); !slices.Contains(got, web) {
		t.Errorf("default/web lost %s (now %v); team/old has %v: the tenant took it with a record it wrote itself", web, got, ips(team.ns, "old"))
	}
	if got := ips(team.ns, "old"); slices.Contains(got, web) {
		t.Errorf("team/old holds web's %s: %v", web, got)
	}
}

// TestANewWriterReadsWhoHoldsAnAddressFromLBIPAM is
// TestATenantsOwnRecordTakesNoAddress across a change of writer: the
// writer that gave web its address is gone (killed) when the tenant of team
// copies web's suffix and address into the record of its older Service, so
// the next leader has no memory of what was given and reads who holds the
// address from what the tenant cannot write - web's
// status.loadBalancer.ingress, where the real LB-IPAM published it. The
// tenant's Role over Services does not reach services/status: its own try
// to publish web's address there is refused.
func TestANewWriterReadsWhoHoldsAnAddressFromLBIPAM(t *testing.T) {
	w := teamLBIPAMWorld(t)
	ctx := t.Context()
	team := olderThanWeb(t, w)
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")

	web := on(t, prefixA, "::ffff:0:1")
	read := func(ns, name string) (ips, published []string) {
		s, err := w.API.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return holdings.Split(s.Annotations[holdings.AnnotationIPs]), holdings.Ingress(s)
	}
	eventually(t, "web holds "+web+" and LB-IPAM publishes it", func() (bool, string) {
		ips, published := read("default", "web")
		return slices.Contains(ips, web) && slices.Contains(published, web), fmt.Sprint(ips, published)
	})
	_ = writer.Process.Kill() // SIGKILL: the next leader starts with no memory

	status := `{"status":{"loadBalancer":{"ingress":[{"ip":"` + web + `"}]}}}`
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "old", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant publishing web's address in its own Service's status: %v, want forbidden", err)
	}
	forgeRecord(t, team, "::ffff:0:1", web)
	startWriter(t, w, "writer-b")
	claimsWeighed(t, w, func() bool { ips, _ := read("default", "web"); return slices.Contains(ips, web) })
	settleWrites()
	if ips, published := read("default", "web"); !slices.Contains(ips, web) || !slices.Contains(published, web) {
		t.Errorf("default/web asks for %v, LB-IPAM publishes %v: it lost %s to team/old (%v)", ips, published, web, fmt.Sprint(read(team.ns, "old")))
	}
	if ips, published := read(team.ns, "old"); slices.Contains(ips, web) || slices.Contains(published, web) {
		t.Errorf("team/old asks for %v, LB-IPAM publishes %v: it took web's %s", ips, published, web)
	}
}

// teamLBIPAMWorld is a world of one node with the real LB-IPAM, its
// router advertising prefixA, "home" in transition mode ha letting
// Services in default and team follow, and the pool "lb" (createPool).
func teamLBIPAMWorld(t *testing.T) *world.World {
	t.Helper()
	w := newWorld(t, 1)
	if _, err := w.StartLBIPAM(); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	createPool(t, w)
	return w
}

// olderThanWeb makes tenantsOlderService and then default/web (suffix
// ::ffff:0:1, without DNS).
func olderThanWeb(t *testing.T, w *world.World) tenant {
	t.Helper()
	team := tenantsOlderService(t, w)
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1", holdings.AnnotationSkipDNS: "true"})
	return team
}

// tenantsOlderService makes the tenant of team and its Service team/old
// (suffix ::ffff:0:9, following home without DNS), and waits for the next
// creation second: what is made next is younger.
func tenantsOlderService(t *testing.T, w *world.World) tenant {
	t.Helper()
	team := newTenant(t, w, "team")
	createServiceWith(t, team.cs, team.ns, "old", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationSuffix: "::ffff:0:9", holdings.AnnotationSkipDNS: "true"})
	eventually(t, "a later creation second", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services(team.ns).Get(t.Context(), "old", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.Now().Unix() > s.CreationTimestamp.Unix(), ""
	})
	return team
}

// forgeRecord is the tenant of team copying a suffix onto team/old and, in
// the same patch, the address it gives into old's managed-ips record.
func forgeRecord(t *testing.T, team tenant, suffix, address string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + holdings.AnnotationSuffix + `":"` + suffix + `","` + holdings.AnnotationManagedIPs + `":"` + address + `"}}}`
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(t.Context(), "old", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the tenant patching its own Service: %v", err)
	}
}

// claimsWeighed waits until the writer reported the conflict on home, or
// web lost its address (webHolds false).
func claimsWeighed(t *testing.T, w *world.World, webHolds func() bool) {
	t.Helper()
	eventually(t, "the writer weighed the claims", func() (bool, string) {
		if !webHolds() {
			return true, "web lost it"
		}
		// Within a term the writer's memory settles it (an ordinary
		// conflict); at a new term the tenant, asking for an address a
		// load balancer publishes for web, is held (AddressPublishedForAnother).
		c := condition(dpStatus(t, w, "home"), render.ServiceAddressConflict)
		return c == "True "+render.ServiceAddressConflict || c == "True "+render.ReasonPublishedElsewhere, c
	})
}

// TestANewWriterReadsWhoHoldsAGatewaysAddressFromItsStatus is
// TestANewWriterReadsWhoHoldsAnAddressFromLBIPAM for a Gateway
// (manifests/examples/gateway.yaml) with Cilium's own Gateway controller,
// which publishes the Gateway's addresses in its status.addresses: the
// tenant of team, whose Service is older than the Gateway, copies the
// Gateway's suffix and address into its own record while no writer runs,
// and the next leader leaves the address with the Gateway.
func TestANewWriterReadsWhoHoldsAGatewaysAddressFromItsStatus(t *testing.T) {
	w, repo := ciliumGatewayWorld(t)
	ctx := t.Context()
	team := tenantsOlderService(t, w)
	if err := w.API.Apply(ctx, filepath.Join(repo, "manifests", "examples", "gateway.yaml")); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	writer := startWriter(t, w, "writer-a")

	gw := on(t, prefixA, "::ffff:0:0:3")
	gateway := func() (addresses, published []string) {
		u, err := w.API.Dynamic.Resource(gatewayGVR).Namespace("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for field, into := range map[string]*[]string{"spec": &addresses, "status": &published} {
			list, _, _ := unstructured.NestedSlice(u.Object, field, "addresses")
			for _, a := range list {
				*into = append(*into, fmt.Sprint(a.(map[string]any)["value"]))
			}
		}
		return addresses, published
	}
	holds := func() bool {
		addresses, published := gateway()
		return slices.Contains(addresses, gw) && slices.Contains(published, gw)
	}
	eventually(t, "the Gateway holds "+gw+" and its controller publishes it", func() (bool, string) {
		addresses, published := gateway()
		return holds(), fmt.Sprint(addresses, published)
	})
	_ = writer.Process.Kill() // SIGKILL: the next leader starts with no memory

	forgeRecord(t, team, "::ffff:0:0:3", gw)
	startWriter(t, w, "writer-b")
	claimsWeighed(t, w, holds)
	settleWrites()
	if addresses, published := gateway(); !holds() {
		t.Errorf("Gateway default/web has %v, its controller publishes %v: it lost %s", addresses, published, gw)
	}
	s, err := w.API.Client.CoreV1().Services(team.ns).Get(ctx, "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ips := holdings.Split(s.Annotations[holdings.AnnotationIPs]); slices.Contains(ips, gw) {
		t.Errorf("team/old asks LB-IPAM for %v: it took the Gateway's %s", ips, gw)
	}
}
