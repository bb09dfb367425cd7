package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// Red team r10b F1 with the real LB-IPAM and the writer's shipped write
// budget (TestRT10BATenantFightingItsOwnServicesDoesNotHoldWebsDNSTargetOnTheDrainingPrefix
// is the fixture): the tenant of team - a ServiceAccount with a Role over
// Services in its namespace, which home lets follow - made 40 Services
// following home, each with a suffix of its own, before web was created.
// It takes renumber's address out of each one's lbipam.cilium.io/ips as
// soon as the writer puts it back: 2 writes a minute for each (its
// object bucket), 80 in all, against the total bucket's 60 shared by
// everyone. The router renumbers A -> B, A draining for 2 minutes: web's
// first write under the new decision is free (B added, the DNS target held
// on A until LB-IPAM publishes B), but the target's move onto B once
// LB-IPAM publishes it takes from the total bucket, whose every token goes
// to the tenant's Services first in the pass (the oldest first). Measured
// (29 Nov, a loaded machine): the writer's writes in the fight's second
// minute 101; web's target stayed on A for the 150 s watched, past A's
// expiry, when the drain's end (a new decision) wrote web free - and that
// patch met a conflict (LB-IPAM had just written web's status), so its
// retry needed the spent budget too: home PoolError, Ready False, web's
// DNS target naming an expired address. Wanted: web's DNS target on B
// within 30 s of LB-IPAM publishing it.
func TestRT10BATenantFightingItsOwnServicesHoldsNoTargetOnTheDrainingPrefix(t *testing.T) {
	w := teamLBIPAMWorld(t)
	ctx := t.Context()
	team := newTenant(t, w, "team")
	const n = 40
	for i := range n {
		createServiceWith(t, team.cs, team.ns, fmt.Sprintf("fight-%02d", i), map[string]string{"dynamic-prefix.io/name": "home",
			holdings.AnnotationSuffix: fmt.Sprintf("::eeee:0:%x", i+1), holdings.AnnotationSkipDNS: "true"})
	}
	time.Sleep(1100 * time.Millisecond) // web is younger by a second at least
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1"})
	startAgent(t, w, "node1")
	startWriter(t, w, "writer")
	onA, onB := on(t, prefixA, "::ffff:0:1"), on(t, prefixB, "::ffff:0:1")
	read := func(ns, name string) (map[string]string, []string) { return annotationsAndIngress(t, w, ns, name) }
	eventually(t, "web's target "+onA+", published for it", func() (bool, string) {
		ann, published := read("default", "web")
		return ann[holdings.AnnotationTarget] == onA && slices.Contains(published, onA), fmt.Sprint(ann, published)
	})

	// The fight: every renumber address put back on a tenant's Service is
	// taken out again.
	var stripped atomic.Int64
	fightCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		strip := []byte(`{"metadata":{"annotations":{"` + holdings.AnnotationIPs + `":null}}}`)
		for fightCtx.Err() == nil {
			watch, err := team.cs.CoreV1().Services(team.ns).Watch(fightCtx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for ev := range watch.ResultChan() {
				s, ok := ev.Object.(*corev1.Service)
				if !ok || s.Annotations[holdings.AnnotationIPs] == "" {
					continue
				}
				go func(name string) {
					if _, err := team.cs.CoreV1().Services(team.ns).Patch(fightCtx, name, types.MergePatchType, strip, metav1.PatchOptions{}); err == nil {
						stripped.Add(1)
					}
				}(s.Name)
			}
			watch.Stop()
		}
	}()
	defer func() { stop(); <-done }()
	// The total bucket (200) is spent within seconds; then the writer's
	// Service writes run at its rate, 60 a minute.
	time.Sleep(30 * time.Second)
	m := mark(t, w)
	time.Sleep(60 * time.Second)
	t.Logf("the writer's writes in the fight's second minute: %d (the tenant stripped %d times so far)", len(objectWrites(writesBy(t, w, m, writerUser))), stripped.Load())

	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second},
		world.Advert{Prefix: prefixA, Valid: 120 * time.Second, Preferred: 0}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web asks for "+onB+" and LB-IPAM publishes it", func() (bool, string) {
		ann, published := read("default", "web")
		return slices.Contains(holdings.Split(ann[holdings.AnnotationIPs]), onB) && slices.Contains(published, onB), fmt.Sprint(ann, published)
	})
	published := time.Now()
	var moved time.Duration
	for time.Since(published) < 150*time.Second {
		if ann, _ := read("default", "web"); ann[holdings.AnnotationTarget] == onB {
			moved = time.Since(published)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	ann, _ := read("default", "web")
	t.Logf("web's DNS target %q: moved to %s %s after LB-IPAM published it (0: not in 150 s, A expiring meanwhile); the tenant stripped its Services %d times",
		ann[holdings.AnnotationTarget], onB, moved.Round(time.Second), stripped.Load())
	if moved == 0 || moved > 30*time.Second {
		t.Errorf("web's DNS target moved to %s %s after LB-IPAM published it (0: never in 150 s), want within 30 s: %d tenant Services fighting spend the shared write budget",
			onB, moved.Round(time.Second), n)
	}
}
