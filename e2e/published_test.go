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
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// Issue 42 (red team r6a, F1), with the real LB-IPAM: a tenant's Service,
// following nothing, lists web's next address in its own
// lbipam.cilium.io/ips before the renumbering - a request LB-IPAM leaves
// waiting (no pool holds it). When the router renumbers, the writer names
// B in home's status, the pool gains B, and then web's Service asks for
// its address on B: LB-IPAM grants the tenant's waiting request first
// (what the red team assumed; logged). Web keeps asking for it, but its
// DNS target is never it: it stays on A while A drains, and has none once
// the drain ends; home says so (ServiceAddressConflict
// AddressPublishedForAnother, Ready False), with no write while it lasts.
// When the tenant takes its entry out, LB-IPAM gives the address to web
// and web's target moves onto it.
func TestATenantsGrantedAddressIsNotWebsDNSTarget(t *testing.T) {
	tenantsGrantedAddress(t, 0)
}

// Red team r7a (F1): the same with the tenant's lbipam.cilium.io/ips listing
// 64 addresses of its own on B before web's: the writer's caches keep 64
// load-balancer addresses of one object whole (holdings.Bounded), the rest
// only as the prefixes they fall in - which still names the tenant.
func TestATenantsGrantedAddressPastTheCachesBoundIsNotWebsDNSTarget(t *testing.T) {
	tenantsGrantedAddress(t, holdings.MaxKeptPublished)
}

// tenantsGrantedAddress plays TestATenantsGrantedAddressIsNotWebsDNSTarget
// with padding addresses of the tenant's own on B listed before web's.
func tenantsGrantedAddress(t *testing.T, padding int) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if _, err := w.StartLBIPAM(); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	createPool(t, w)
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"})
	onA, onB := on(t, prefixA, "::ffff:0:1"), on(t, prefixB, "::ffff:0:1")
	team := newTenant(t, w, "team")
	var asks []string
	for i := range padding {
		asks = append(asks, on(t, prefixB, fmt.Sprintf("::eeee:0:%x", i+1)))
	}
	createServiceWith(t, team.cs, team.ns, "squat", map[string]string{holdings.AnnotationIPs: strings.Join(append(asks, onB), ",")})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer")

	read := func(ns, name string) (map[string]string, []string) { return annotationsAndIngress(t, w, ns, name) }
	eventually(t, "web's target "+onA+", published for it", func() (bool, string) {
		ann, published := read("default", "web")
		return ann[holdings.AnnotationTarget] == onA && slices.Contains(published, onA), fmt.Sprint(ann, published)
	})
	// The router renumbers; A drains for 30 s.
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		world.Advert{Prefix: prefixA, Valid: 30 * time.Second, Preferred: 0}); err != nil {
		t.Fatal(err)
	}
	winner := ""
	eventually(t, "LB-IPAM grants "+onB, func() (bool, string) {
		_, web := read("default", "web")
		_, squat := read(team.ns, "squat")
		switch {
		case slices.Contains(squat, onB):
			winner = "team/squat"
		case slices.Contains(web, onB):
			winner = "default/web"
		}
		return winner != "", fmt.Sprint(web, squat)
	})
	_, squat := read(team.ns, "squat")
	t.Logf("LB-IPAM granted %s to %s first (entry %d of the tenant's %d)", onB, winner, slices.Index(squat, onB)+1, len(squat))
	if winner != "team/squat" {
		t.Skipf("LB-IPAM granted %s to web, not to the tenant's waiting request: the red team's premise did not happen here", onB)
	}
	noTarget := func(ann map[string]string) bool {
		return ann[holdings.AnnotationTarget] != onB && ann[holdings.AnnotationTargetAlpha] != onB
	}
	eventuallyWithin(t, 90*time.Second, "A's drain ends", func() (bool, string) {
		pooled := render.StatusPooled(dpStatus(t, w, "home"))
		return slices.Equal(pooled, []netip.Prefix{prefixB}), fmt.Sprint(pooled)
	})
	eventually(t, "home reports the address published for team/squat", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, render.ServiceAddressConflict) == "True "+render.ReasonPublishedElsewhere, condition(st, render.ServiceAddressConflict)
	})
	settleWrites()
	m := mark(t, w)
	settleWrites()
	ann, published := read("default", "web")
	if !noTarget(ann) || !slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), onB) {
		t.Errorf("web: ips %q target %q/%q (LB-IPAM publishes %v): want it asking for %s, and no target on it",
			ann[holdings.AnnotationIPs], ann[holdings.AnnotationTarget], ann[holdings.AnnotationTargetAlpha], published, onB)
	}
	if r := condition(dpStatus(t, w, "home"), render.Ready); r != "False NotReady" {
		t.Errorf("home's Ready is %q while web's address is published for team/squat", r)
	}
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("the writer wrote %q while the conflict lasted", got)
	}
	events, err := w.API.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=" + render.ServiceAddressConflict})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Count > 1 {
		t.Errorf("%d %s events on web (%+v), want one, once", len(events.Items), render.ServiceAddressConflict, events.Items)
	}

	// The tenant lets it go.
	if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "squat", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+holdings.AnnotationIPs+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web's target "+onB+", published for it", func() (bool, string) {
		ann, published := read("default", "web")
		return ann[holdings.AnnotationTarget] == onB && slices.Contains(published, onB), fmt.Sprint(ann, published)
	})
	eventually(t, "home Ready again", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, render.Ready) == "True Ready" && condition(st, render.ServiceAddressConflict) == "", fmt.Sprint(st.Conditions)
	})
}

// Red team r8 F3, with the real LB-IPAM: the tenant of team has a Service
// old that follows home with a suffix of its own, and lists in its own
// lbipam.cilium.io/ips the address ::ffff:0:5 on A - free, LB-IPAM grants
// it. The router renumbers; A drains. Then default/fresh is created, with
// suffix ::ffff:0:5: its address on A is old's at the load balancer.
// Possession barred fresh whole - nothing was written for it, not its
// address on B either, for the whole drain - and home reported an ordinary
// conflict. Now its address on A alone is withheld: fresh is written its
// address on B, LB-IPAM publishes it and the DNS target follows; home
// reports AddressPublishedForAnother naming team/old (Ready False), with
// no write while it lasts; and once the tenant takes its entry out, fresh
// is written its address on A too and LB-IPAM grants it.
func TestAServiceCreatedDuringADrainGetsItsCurrentAddressFromLBIPAM(t *testing.T) {
	w := teamLBIPAMWorld(t)
	ctx := t.Context()
	onA, onB := on(t, prefixA, "::ffff:0:5"), on(t, prefixB, "::ffff:0:5")
	team := newTenant(t, w, "team")
	createServiceWith(t, team.cs, team.ns, "old", map[string]string{"dynamic-prefix.io/name": "home",
		holdings.AnnotationSuffix: "::ffff:0:9", holdings.AnnotationSkipDNS: "true"})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer")

	read := func(ns, name string) (map[string]string, []string) { return annotationsAndIngress(t, w, ns, name) }
	setIPs := func(entries []string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, holdings.AnnotationIPs, strings.Join(entries, ","))
		if _, err := team.cs.CoreV1().Services(team.ns).Patch(ctx, "old", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oldOnA, oldOnB := on(t, prefixA, "::ffff:0:9"), on(t, prefixB, "::ffff:0:9")
	eventually(t, "team/old written "+oldOnA, func() (bool, string) {
		ann, _ := read(team.ns, "old")
		return slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), oldOnA) && ann[holdings.AnnotationManagedIPs] != "", fmt.Sprint(ann)
	})
	// The tenant adds an entry of its own (beside the writer's, recorded).
	oldAnn, _ := read(team.ns, "old")
	setIPs(append(holdings.Split(oldAnn[holdings.AnnotationIPs]), onA))
	eventually(t, "LB-IPAM grants team/old its own entry "+onA, func() (bool, string) {
		_, published := read(team.ns, "old")
		return slices.Contains(published, onA), fmt.Sprint(published)
	})
	// The router renumbers; A drains for 10 minutes.
	advertise(t, w, prefixB, prefixA)
	eventually(t, "team/old's address on B published (the pool holds B)", func() (bool, string) {
		_, published := read(team.ns, "old")
		return slices.Contains(published, oldOnB), fmt.Sprint(published)
	})
	createService(t, w, "fresh", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:5"})
	eventually(t, "fresh asks for "+onB+", LB-IPAM publishes it, its DNS target", func() (bool, string) {
		ann, published := read("default", "fresh")
		return slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), onB) && slices.Contains(published, onB) &&
			ann[holdings.AnnotationTarget] == onB, fmt.Sprint(ann, published, condition(dpStatus(t, w, "home"), render.ServiceAddressConflict))
	})
	eventually(t, "home reports "+onA+" published for team/old", func() (bool, string) {
		st := dpStatus(t, w, "home")
		c := condition(st, render.ServiceAddressConflict)
		for _, x := range st.Conditions {
			if x.Type == render.ServiceAddressConflict {
				c += ": " + x.Message
			}
		}
		return strings.HasPrefix(c, "True "+render.ReasonPublishedElsewhere) && strings.Contains(c, onA) && strings.Contains(c, "team/old"), c
	})
	settleWrites()
	m := mark(t, w)
	settleWrites()
	ann, published := read("default", "fresh")
	if slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), onA) {
		t.Errorf("fresh asks for %s (%q), published for team/old", onA, ann[holdings.AnnotationIPs])
	}
	t.Logf("fresh: ips %q target %q, LB-IPAM publishes %v", ann[holdings.AnnotationIPs], ann[holdings.AnnotationTarget], published)
	if r := condition(dpStatus(t, w, "home"), render.Ready); r != "False NotReady" {
		t.Errorf("home's Ready is %q while fresh's address on A is published for team/old", r)
	}
	if got := objectWrites(writesBy(t, w, m, writerUser)); len(got) != 0 {
		t.Errorf("the writer wrote %q while the conflict lasted", got)
	}

	// The tenant takes its entry out.
	oldAnn, _ = read(team.ns, "old")
	setIPs(slices.DeleteFunc(holdings.Split(oldAnn[holdings.AnnotationIPs]), func(e string) bool { return e == onA }))
	eventually(t, "fresh asks for "+onA+" too, and LB-IPAM grants it", func() (bool, string) {
		ann, published := read("default", "fresh")
		return slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), onA) && slices.Contains(published, onA), fmt.Sprint(ann, published)
	})
	eventually(t, "home Ready again", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, render.Ready) == "True Ready" && condition(st, render.ServiceAddressConflict) == "", fmt.Sprint(st.Conditions)
	})
}

// annotationsAndIngress is the Service ns/name's annotations and what its
// load balancer publishes for it.
func annotationsAndIngress(t *testing.T, w *world.World, ns, name string) (map[string]string, []string) {
	t.Helper()
	s, err := w.API.Client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Annotations, holdings.Ingress(s)
}
