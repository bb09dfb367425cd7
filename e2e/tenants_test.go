package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// TestTenantsTakeNoAddressTheyAreNotGiven (issue 42 item 11): the admin says
// which namespaces' Services follow a DynamicPrefix (spec.serviceNamespaces:
// default and team), and two Services asking for one address never share
// it. The tenants are real: each a ServiceAccount whose Role lets it create
// and change Services (and NetworkPolicies) in its own namespace alone. The
// tenant of namespace tenant, not named, gets nothing for its Service - no
// write on it, the event NamespaceNotAllowed. The tenant of team copies the
// suffix of default/web, older, onto its own Service: the older keeps the
// address, across a renumbering, and team's gets none of renumber's
// addresses (its own stay), with an event on each and the condition
// ServiceAddressConflict on the DynamicPrefix - until its suffix is its own.
func TestTenantsTakeNoAddressTheyAreNotGiven(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}, "serviceNamespaces": []any{"default", "team"}})
	outsider, team := newTenant(t, w, "tenant"), newTenant(t, w, "team")
	follow := func(suffix string) map[string]string {
		return map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: suffix, holdings.AnnotationSkipDNS: "true"}
	}
	createService(t, w, "web", follow("::ffff:0:1"))
	// One second later at least: creation times are in seconds.
	eventually(t, "a later creation second", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return metav1.Now().Unix() > s.CreationTimestamp.Unix(), ""
	})
	copied := follow("::ffff:0:1")
	copied[holdings.AnnotationIPs] = "192.0.2.7"
	m0 := mark(t, w)
	createServiceWith(t, team.cs, team.ns, "copy", copied)
	createServiceWith(t, outsider.cs, outsider.ns, "web", follow("::ffff:0:3"))
	for _, tn := range []tenant{team, outsider} {
		if got := len(writesBy(t, w, m0, tn.user)); got != 1 {
			t.Errorf("the audit log has %d writes by %s, want its Service", got, tn.user)
		}
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	on := func(p netip.Prefix, suffix string) string {
		a, err := model.Splice(p, netip.MustParseAddr(suffix))
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	ips := func(ns, name string) []string {
		s, err := w.API.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return holdings.Split(s.Annotations[holdings.AnnotationIPs])
	}
	expect := func(what string, want map[string][]string) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			got := map[string][]string{}
			for k := range want {
				ns, name, _ := strings.Cut(k, "/")
				got[k] = ips(ns, name)
			}
			for k, v := range want {
				if !slices.Equal(got[k], v) {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
	}
	expect("the older Service's address, none for the younger or the tenant's", map[string][]string{
		"default/web": {on(prefixA, "::ffff:0:1")}, "team/copy": {"192.0.2.7"}, "tenant/web": nil})
	waitEvent(t, w, render.ServiceAddressConflict, "copy")
	waitEvent(t, w, render.ServiceAddressConflict, "home")
	waitEvent(t, w, "NamespaceNotAllowed", "web")
	if c := condition(dpStatus(t, w, "home"), render.ServiceAddressConflict); c != "True "+render.ServiceAddressConflict {
		t.Errorf("condition %s: %q, want True", render.ServiceAddressConflict, c)
	}

	advertise(t, w, prefixB, prefixA)
	expect("after a renumbering, still the older Service's", map[string][]string{
		"default/web": {on(prefixB, "::ffff:0:1"), on(prefixA, "::ffff:0:1")}, "team/copy": {"192.0.2.7"}, "tenant/web": nil})

	// At rest, with the conflict and the tenant still there: no write, and
	// no event again.
	settleWrites()
	m := mark(t, w)
	time.Sleep(10 * time.Second) // quiet: RAs every few seconds, as in TestHAServiceFollowsThePrefix
	var got []string
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource != "leases" {
			got = append(got, fmt.Sprintf("%s %s %s", wr.Verb, wr.Resource, wr.Name))
		}
	}
	if len(got) > 0 {
		t.Errorf("at rest the writer wrote %q", got)
	}

	for _, wr := range writesBy(t, w, m0, writerUser) {
		if wr.Resource == "services" && wr.Namespace == outsider.ns {
			t.Errorf("the writer wrote the Service of a namespace not named: %s", wr)
		}
	}

	patch := `{"metadata":{"annotations":{"` + holdings.AnnotationSuffix + `":"::ffff:0:2"}}}`
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "copy", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("its own suffix, its own address", map[string][]string{
		"team/copy": {"192.0.2.7", on(prefixB, "::ffff:0:2"), on(prefixA, "::ffff:0:2")}, "tenant/web": nil})
	eventually(t, "the condition gone", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), render.ServiceAddressConflict)
		return c == "", c
	})
}
