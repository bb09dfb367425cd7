package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestGatewaysTakeNoAddressTheyAreNotGiven (issue 42 item 11, for the
// Gateways of issue 44): Gateways share the Services' tenant rules. The
// DynamicPrefix lets default and team follow (spec.serviceNamespaces). The
// Gateway outsider/gw, in a namespace not named, is never written and gets
// the event NamespaceNotAllowed. The Gateway team/copy, created after the
// Service default/web, asks for web's address (its suffix): web keeps it,
// across a renumbering, copy gets none of renumber's addresses (its own
// stay), with its event and the condition ServiceAddressConflict naming it;
// the Gateway team/own, with a suffix of its own, follows. At rest nothing
// is written. The writer runs under the shipped RBAC and admission
// policies, with the Gateway API's real CRDs.
func TestGatewaysTakeNoAddressTheyAreNotGiven(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if err := w.API.InstallGatewayAPI(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team", "outsider"} {
		if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1", holdings.AnnotationSkipDNS: "true"})
	// One second later at least: creation times are in seconds.
	eventually(t, "a later creation second", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.Now().Unix() > s.CreationTimestamp.Unix(), ""
	})
	gateway := func(ns, name, suffix string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"namespace": ns, "name": name, "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: suffix}},
			"spec": map[string]any{"gatewayClassName": "cilium",
				"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}},
				"addresses": []any{map[string]any{"type": "IPAddress", "value": "192.0.2.9"}}},
		}}
		if _, err := w.API.Dynamic.Resource(gatewayGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gateway("team", "copy", "::ffff:0:1")
	gateway("team", "own", "::ffff:0:2")
	gateway("outsider", "gw", "::ffff:0:3")
	m0 := mark(t, w)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	expect := func(what string, want map[string]string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			got := map[string]string{}
			for k := range want {
				ns, name, _ := strings.Cut(k, "/")
				if ns == "default" {
					s, err := w.API.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					got[k] = s.Annotations[holdings.AnnotationIPs]
					continue
				}
				got[k] = fmt.Sprint(gatewayHolds(t, w, ns, name)["addresses"])
			}
			diff := cmp.Diff(want, got)
			return diff == "", "(-want +got)\n" + diff
		})
	}
	a1, a2 := on(t, prefixA, "::ffff:0:1"), on(t, prefixA, "::ffff:0:2")
	expect("web's address its own, none for the copying Gateway or the outsider's", map[string]string{
		"default/web": a1, "team/own": "IPAddress 192.0.2.9, IPAddress " + a2,
		"team/copy": "IPAddress 192.0.2.9", "outsider/gw": "IPAddress 192.0.2.9"})
	waitEvent(t, w, render.ServiceAddressConflict, "copy")
	waitEvent(t, w, "NamespaceNotAllowed", "gw")
	eventually(t, "the condition naming the Gateway", func() (bool, string) {
		for _, c := range dpStatus(t, w, "home").Conditions {
			if c.Type == render.ServiceAddressConflict {
				return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, a1+" is asked for by default/web and Gateway team/copy"), c.Message
			}
		}
		return false, "no condition"
	})

	advertise(t, w, prefixB, prefixA)
	b1, b2 := on(t, prefixB, "::ffff:0:1"), on(t, prefixB, "::ffff:0:2")
	expect("after a renumbering, still web's", map[string]string{
		"default/web": b1 + "," + a1, "team/own": "IPAddress 192.0.2.9, IPAddress " + b2 + ", IPAddress " + a2,
		"team/copy": "IPAddress 192.0.2.9", "outsider/gw": "IPAddress 192.0.2.9"})

	// At rest, with the conflict and the outsider still there: no write.
	settleWrites()
	m := mark(t, w)
	settleWrites()
	settleWrites()
	var got []string
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource != "leases" {
			got = append(got, wr.String())
		}
	}
	if len(got) > 0 {
		t.Errorf("at rest the writer wrote %q", got)
	}
	for _, wr := range writesBy(t, w, m0, writerUser) {
		if wr.Resource == "gateways" && (wr.Namespace == "outsider" || wr.Name == "copy") {
			t.Errorf("the writer wrote a Gateway it may not give an address: %s", wr)
		}
	}
}
