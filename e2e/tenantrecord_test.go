package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
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
	team := newTenant(t, w, "team")
	follow := func(suffix string) map[string]string {
		return map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: suffix, holdings.AnnotationSkipDNS: "true"}
	}
	createServiceWith(t, team.cs, team.ns, "old", follow("::ffff:0:9"))
	eventually(t, "a later creation second", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services(team.ns).Get(ctx, "old", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.Now().Unix() > s.CreationTimestamp.Unix(), ""
	})
	createService(t, w, "web", follow("::ffff:0:1"))
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	webs, err := model.Splice(prefixA, netip.MustParseAddr("::ffff:0:1"))
	if err != nil {
		t.Fatal(err)
	}
	web := webs.String()
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

	patch := `{"metadata":{"annotations":{"` + holdings.AnnotationSuffix + `":"::ffff:0:1","` + holdings.AnnotationManagedIPs + `":"` + web + `"}}}`
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "old", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the tenant patching its own Service: %v", err)
	}
	// Either the writer reports the conflict on old, or web loses its address.
	eventually(t, "the writer weighed the claims", func() (bool, string) {
		if !slices.Contains(ips("default", "web"), web) {
			return true, "web lost it"
		}
		c := condition(dpStatus(t, w, "home"), render.ServiceAddressConflict)
		return c == "True "+render.ServiceAddressConflict, c
	})
	settleWrites()
	if got := ips("default", "web"); !slices.Contains(got, web) {
		t.Errorf("default/web lost %s (now %v); team/old has %v: the tenant took it with a record it wrote itself", web, got, ips(team.ns, "old"))
	}
	if got := ips(team.ns, "old"); slices.Contains(got, web) {
		t.Errorf("team/old holds web's %s: %v", web, got)
	}
}
