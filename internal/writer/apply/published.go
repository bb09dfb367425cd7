package apply

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/render"
)

// publishedElsewhere reports, on the Service x whose claim won, the
// addresses the writer gives it that a load balancer publishes for another
// object only (serviceAsk.elsewhere): once while they stay the same, and
// returns them for the DynamicPrefix's condition.
func (w *Writer) publishedElsewhere(x *serviceAsk) []render.Conflict {
	w.announceConflicts("svc/"+x.self.String()+"/published", x.m, x.elsewhere,
		"a load balancer publishes renumber's address for this Service for another object (%s): renumber keeps asking for it, and this Service's DNS target is not it until that ends")
	return x.elsewhere
}

// announceConflicts announces on the Service m, under subject, the
// addresses of cs a load balancer publishes for another ("address for
// holder; ..." put in msg) - once while they stay the same - and forgets
// the subject when there are none.
func (w *Writer) announceConflicts(subject string, m *corev1.Service, cs []render.Conflict, msg string) {
	if len(cs) == 0 {
		w.Events.Forget(subject)
		return
	}
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s for %s", c.Address, c.Holder))
	}
	w.Events.Announce(subject, serviceRef(m), true, render.ServiceAddressConflict, fmt.Sprintf(msg, strings.Join(parts, "; ")))
}

// sawPublished remembers who dp's last pass found a load balancer
// publishing an address it gave another for (conflicts: the pass's).
func (w *Writer) sawPublished(dp string, conflicts []render.Conflict) {
	var who []string
	for _, c := range conflicts {
		if c.Published && !slices.Contains(who, c.Holder) {
			who = append(who, c.Holder)
		}
	}
	w.givenMu.Lock()
	defer w.givenMu.Unlock()
	if len(who) == 0 {
		delete(w.published, dp)
		return
	}
	if w.published == nil {
		w.published = map[string][]string{}
	}
	w.published[dp] = who
}

// Concerned returns the DynamicPrefixes whose last pass a change of what a
// load balancer publishes for who (now: published) may undo: one that found
// it publishing an address the pass gave another (who may have let it go),
// and one that gave another an address it publishes now (who was granted
// it). A pass over each of them looks again: who need not follow it (a
// Service of its own with the address in its lbipam.cilium.io/ips), so the
// pass its change queues may be another's or none. An entry of published
// may be a prefix (holdings.Bounded: the cache kept only the /64 of
// addresses past its bound): every address in it counts as published.
func (w *Writer) Concerned(who string, published []string) []string {
	w.givenMu.Lock()
	defer w.givenMu.Unlock()
	var out []string
	for dp, ys := range w.published {
		if slices.Contains(ys, who) {
			out = append(out, dp)
		}
	}
	for dp, g := range w.given {
		if slices.Contains(out, dp) {
			continue
		}
		for a, to := range g.To {
			if to != who && holdings.AmongPublished(published, a) {
				out = append(out, dp)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
