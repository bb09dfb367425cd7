package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/internal/writer/render"
)

// Services writes the Services (from the Service cache) that follow model's
// DynamicPrefix: in transition mode ha every one, in mode simple those whose
// DNS target is a mapped address (holdings.AnnotationMapping), releasing the
// others - and those in a namespace the DynamicPrefix does not let follow
// (spec.serviceNamespaces). The pools of a kind that claims addresses
// (backends.Kind.Claims: Gateways) are written here too, under the same two
// rules. No two of them get one address: the one that holds it keeps it
// (render.Hold: what its owner cannot write decides; else the one created
// first), the other is released, and the conflicts are returned for the
// DynamicPrefix's status.
func (w *Writer) Services(ctx context.Context, services cache.Indexer, pools []backends.Cached, spec model.Model, d decide.Decision) (permit.Outcomes, []render.Conflict) {
	out, asks := w.serviceAsks(ctx, services, pools, spec, d)
	gwOut, gwAsks := w.claimantAsks(ctx, services, pools, spec, d)
	out, asks = append(out, gwOut...), append(asks, gwAsks...)
	// The strongest hold first (render.Hold: what the writer gave, what
	// the load balancer publishes, what a Gateway's status echoes, only then
	// the owner's own record), then the oldest: a tenant cannot take an
	// address by copying its suffix, or the address into its record or its
	// Gateway's spec, onto an older object of its own.
	last := w.lastGiven(spec.Name)
	asks = offer(asks, last, spec, d.Pooled, d.Managed)
	var conflicts []render.Conflict
	given := render.NewGiven()
	for _, x := range asks {
		c, ok := x.claim(given, last, spec, d.Pooled)
		if !ok {
			conflicts = append(conflicts, c)
		}
		if x.held.Address != "" {
			conflicts = append(conflicts, x.held)
			w.announceHeld(x)
		}
		conflicts = append(conflicts, w.announceWithheld(x)...)
		switch {
		case x.absent: // nothing to write
		case x.pool != nil:
			out = append(out, w.claimantPool(ctx, x.pool, spec, d, c, ok))
		case ok:
			w.Events.Forget("svc/" + x.svc.self.String() + "/conflict")
			if err := x.svc.withhold(spec, d.Pooled, x.withheld); err != nil {
				out = append(out, permit.Final(err))
				break
			}
			conflicts = append(conflicts, w.publishedElsewhere(x.svc)...)
			out = append(out, w.writeService(ctx, x.svc, spec))
		default:
			w.Events.Forget("svc/" + x.svc.self.String() + "/published")
			m := x.svc.m
			w.Events.Announce("svc/"+x.svc.self.String()+"/conflict", serviceRef(m), true, render.ServiceAddressConflict,
				fmt.Sprintf("%s is asked for by %s too, which holds it or asked first: this Service gets none of renumber's addresses until its dynamic-prefix.io/suffix is its own", c.Address, c.Holder))
			out = append(out, w.releaseFollowing(ctx, pools, services, m.Namespace, m.Name, spec.Name,
				fmt.Sprintf("its address %s is %s's", c.Address, c.Holder)))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() == nil { // a pass cut short has not weighed every ask
		w.gave(spec.Name, remembered(given, last, asks, spec, d.Pooled))
		w.sawPublished(spec.Name, conflicts)
	}
	render.SortConflicts(conflicts)
	return out, conflicts
}

// serviceAsks is what each Service following model's DynamicPrefix asks for;
// those that may not follow, or ask for nothing, are released or refused
// here (the outcomes). Each is rendered with what the load balancers
// publish - for it, and for the other Services and the objects of pools'
// claiming kinds (render.Served).
func (w *Writer) serviceAsks(ctx context.Context, services cache.Indexer, pools []backends.Cached, spec model.Model, d decide.Decision) (permit.Outcomes, []ask) {
	var out permit.Outcomes
	var asks []ask
	opt := render.ServiceOptions{TargetKeys: w.TargetKeys, L2Nudge: w.L2Nudge != nil && w.L2Nudge(), Managed: d.Managed}
	for _, m := range backends.ServicesFollowing(services, spec.Name) {
		if w.generated(pools, m) {
			continue
		}
		self := permit.Object{Resource: "services", Namespace: m.Namespace, Name: m.Name}
		if !spec.LetsFollow(m.Namespace) {
			w.Events.Announce("svc/"+self.String()+"/namespace", serviceRef(m.Service), true, "NamespaceNotAllowed",
				fmt.Sprintf("DynamicPrefix %s does not let Services in namespace %s follow it (spec.serviceNamespaces): it gets no address", spec.Name, m.Namespace))
			out = append(out, w.releaseFollowing(ctx, pools, services, m.Namespace, m.Name, spec.Name,
				fmt.Sprintf("namespace %s may not follow DynamicPrefix %s", m.Namespace, spec.Name)))
			continue
		}
		w.Events.Forget("svc/" + self.String() + "/namespace")
		if !spec.HA && m.Follow.Mapping == "" {
			out = append(out, w.releaseFollowing(ctx, pools, services, m.Namespace, m.Name, spec.Name,
				fmt.Sprintf("DynamicPrefix %s in transition mode simple", spec.Name)))
			continue
		}
		if err := w.tooLarge(self, m.Service); err != nil {
			out = append(out, permit.Final(err))
			asks = append(asks, absentAsk(serviceAskOf(m)))
			continue
		}
		live := m.LiveUnder(w.TargetKeys)
		if last, ok := w.services.Get(self, m.ResourceVersion); ok {
			live = last
		}
		who := api.Key(m.Namespace, m.Name)
		served := render.Served{Self: who, Ingress: m.Ingress, Others: func(a string) []string { return backends.PublishedFor(services, pools, a) }}
		want, err := render.Service(spec, m.Follow, d.Pooled, live, served, opt)
		if err != nil {
			err = fmt.Errorf("service %s/%s: %w", m.Namespace, m.Name, err)
			w.Events.Announce("svc/"+self.String(), serviceRef(m.Service), true, "InvalidServiceAnnotations", err.Error())
			out = append(out, permit.Final(err))
			asks = append(asks, absentAsk(serviceAskOf(m)))
			continue
		}
		sa := &serviceAsk{m: m.Service, self: self, live: live, want: want, elsewhere: render.PublishedElsewhere(who, canonical(want.ManagedIPs), served),
			follow: m.Follow, served: served, opt: opt}
		x := serviceAskOf(m)
		x.ips, x.place, x.svc = canonical(want.ManagedIPs), m.Follow, sa
		x.seen.Recorded = canonical(live.ManagedIPs)
		asks = append(asks, x)
	}
	return out, asks
}

// writeService writes what one Service asks for, unless it holds it.
func (w *Writer) writeService(ctx context.Context, x *serviceAsk, spec model.Model) permit.Outcome {
	m, self, live, want := x.m, x.self, x.live, x.want
	if want.Equal(live) {
		w.Calm(self, spec.Name)
		return permit.Outcome{}
	}
	if w.services.Behind(self, m.ResourceVersion) {
		// Our last write is not in the cache yet (see Writer.pool).
		return permit.Later(CacheBehind)
	}
	if w.Shadow(annotationChanges(self, m.Annotations, want.Patch(live))...) {
		return permit.Outcome{}
	}
	if err := w.Permit(self, serviceRef(m), spec.Name); err != nil {
		return permit.Final(err)
	}
	if err := w.patchService(ctx, m, live, want); err != nil {
		w.Unwritten(self, err)
		if refusedForItsSize(err) { // the Service's own doing: left as it is
			err = fmt.Errorf("service %s/%s: %w", m.Namespace, m.Name, err)
			w.Events.Announce("svc/"+self.String(), serviceRef(m), true, "ServiceAnnotationsTooLarge", err.Error())
			return permit.Final(err)
		}
		return w.failed(self, serviceRef(m), spec.Name, fmt.Sprintf("service %s/%s", m.Namespace, m.Name), err)
	}
	w.Events.Forget("refused/" + self.String())
	w.services.Put(self, m.ResourceVersion, w.readBack(m, live, want))
	permit.Counted("services")
	w.Log.Info(fmt.Sprintf("Service %s/%s addresses updated", m.Namespace, m.Name), "ips", want.ManagedIPs, "dns", want.ManagedTargets, "l2_nudged", want.L2Nudged)
	return permit.Outcome{}
}

// serviceAsk is what one Service following a DynamicPrefix asks for.
type serviceAsk struct {
	m          *corev1.Service
	self       permit.Object
	live, want holdings.Annotations
	// elsewhere: its addresses a load balancer publishes for another
	// object only (render.PublishedElsewhere), none its DNS target.
	elsewhere []render.Conflict
	// What want was rendered from, to render it again (withhold).
	follow holdings.ServiceFollow
	served render.Served
	opt    render.ServiceOptions
}

// withhold renders x's want again with the addresses of withheld left out
// (possessed: on a draining prefix, published for another), and what of
// the rest a load balancer publishes for another only. Nothing withheld,
// it is as it was.
func (x *serviceAsk) withhold(spec model.Model, pooled []netip.Prefix, withheld []render.Conflict) error {
	if len(withheld) == 0 {
		return nil
	}
	opt := x.opt
	for _, c := range withheld {
		opt.Withheld = append(opt.Withheld, c.Address)
	}
	want, err := render.Service(spec, x.follow, pooled, x.live, x.served, opt)
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", x.m.Namespace, x.m.Name, err)
	}
	x.want, x.elsewhere = want, render.PublishedElsewhere(api.Key(x.m.Namespace, x.m.Name), canonical(want.ManagedIPs), x.served)
	return nil
}

// ReleaseService removes our addresses and records from the Service ns/name
// when it names dp: "" once its dynamic-prefix.io/name annotation was removed,
// or a DynamicPrefix that is deleted. The user's entries stay. A release
// takes a write permit as every write does: a refused one returns how long
// to wait (the caller queues the release again). A Service the controller
// of one of pools' objects generated is never released (generated).
func (w *Writer) ReleaseService(ctx context.Context, pools []backends.Cached, services cache.Indexer, ns, name, dp string) (permit.Outcome, time.Duration) {
	why := "dynamic-prefix.io/name removed"
	if dp != "" {
		why = fmt.Sprintf("DynamicPrefix %s deleted", dp)
	}
	return w.releaseService(ctx, pools, services, ns, name, dp, why, false)
}

// generated reports whether the controller of one of pools' objects
// generated the Service s for it (backends.GeneratedBy: Cilium's Gateway
// controller, cilium-gateway-<name>). The writer never writes such a
// Service, neither to follow nor to release: it carries what its object's
// spec says (spec.infrastructure.annotations, merged back by that
// controller on every change), and the object is what follows. Writing it
// was a fight with that controller (red team r10b F3). When it carries
// renumber's keys anyway (its object's infrastructure annotations name
// them), that is its object's event, once.
func (w *Writer) generated(pools []backends.Cached, s *holdings.CachedService) bool {
	p, ok := backends.GeneratedBy(pools, s)
	if !ok {
		return false
	}
	subject := "generated/" + api.Key(s.Namespace, s.Name)
	if s.Follow.DynamicPrefix == "" && !s.Live.IPsRecorded && !s.Live.TargetsRecorded {
		w.Events.Forget(subject)
		return true
	}
	w.Events.Announce(subject, p.Live, true, "InfrastructureAnnotationsIgnored", fmt.Sprintf(
		"the Service %s this %s's controller generates carries renumber's annotations (dynamic-prefix.io/name or a record), copied from spec.infrastructure.annotations: renumber never writes a generated Service, and they are left as they are; to follow a DynamicPrefix, annotate the %s itself",
		s.Name, p.Kind.Name, p.Kind.Name))
	return true
}

// releaseFollowing is the release of a Service that still follows dp, which
// lives, but may hold none of its addresses (why says so): its records are
// emptied (render.ReleaseFollowingService), and a refused permit is a pass
// later (the permit requeued dp).
func (w *Writer) releaseFollowing(ctx context.Context, pools []backends.Cached, services cache.Indexer, ns, name, dp, why string) permit.Outcome {
	o, wait := w.releaseService(ctx, pools, services, ns, name, dp, why, true)
	if wait > 0 {
		return permit.Later(wait)
	}
	return o
}

// releaseService is ReleaseService, saying why in its log and event; of a
// Service that still follows a DynamicPrefix that lives (following), it
// empties the records (render.ReleaseFollowingService).
func (w *Writer) releaseService(ctx context.Context, pools []backends.Cached, services cache.Indexer, ns, name, dp, why string, following bool) (permit.Outcome, time.Duration) {
	o, exists, err := services.GetByKey(api.Key(ns, name))
	if err != nil || !exists {
		return permit.Transient(err), 0
	}
	read, ok := o.(*holdings.CachedService)
	if !ok || read.Follow.DynamicPrefix != dp || w.generated(pools, read) {
		return permit.Outcome{}, 0
	}
	m := read.Service
	self := permit.Object{Resource: "services", Namespace: ns, Name: name}
	if err := w.tooLarge(self, m); err != nil {
		return permit.Final(err), 0
	}
	live := read.LiveUnder(w.TargetKeys)
	if !live.Owned() {
		w.Calm(self, dp)
		return permit.Outcome{}, 0
	}
	if _, ok := w.services.Get(self, m.ResourceVersion); ok {
		return permit.Outcome{}, 0
	}
	want, said := render.ReleaseService(live), "managed addresses, targets and records removed"
	if following {
		want, said = render.ReleaseFollowingService(live), "managed addresses and targets removed, records emptied"
	}
	if w.Shadow(annotationChanges(self, m.Annotations, want.Patch(live))...) {
		return permit.Outcome{}, 0
	}
	if ok, wait := w.TakePermit(self, serviceRef(m), dp); !ok {
		return permit.Outcome{}, wait
	}
	if err := w.patchService(ctx, m, live, want); err != nil {
		w.Unwritten(self, err)
		return w.failed(self, serviceRef(m), dp, fmt.Sprintf("service %s/%s", ns, name), err), 0
	}
	w.Events.Forget("refused/" + self.String())
	w.services.Put(self, m.ResourceVersion, w.readBack(m, live, want))
	permit.Counted("services")
	w.Log.Info(fmt.Sprintf("Service %s/%s released", ns, name), "why", why)
	w.Events.Event(serviceRef(m), "ServiceReleased", why+": "+said)
	return permit.Outcome{}, 0
}

// tooLarge refuses a Service whose annotations the cache did not keep
// (holdings.Oversized): writing ours back needs the whole values; or one with
// more entries in an annotation than the writer may write
// (holdings.TooManyEntries). The Service is left as it is and the refusal is
// its event.
func (w *Writer) tooLarge(self permit.Object, m *corev1.Service) error {
	n, over := holdings.Oversized(m)
	k, many := holdings.TooManyEntries(m.Annotations)
	var err error
	switch {
	case over:
		err = fmt.Errorf("service %s/%s: its annotations renumber reads total %d bytes, more than the %d it keeps; it is left as it is", m.Namespace, m.Name, n, holdings.MaxKeptBytes)
	case many:
		err = fmt.Errorf("service %s/%s: %s holds more than %d entries, more than the admission policy renumber-writer-sizes lets the writer write; it is left as it is", m.Namespace, m.Name, k, holdings.MaxEntries)
	default:
		return nil
	}
	w.Events.Announce("svc/"+self.String(), serviceRef(m), true, "ServiceAnnotationsTooLarge", err.Error())
	return err
}

// readBack is what the Service cache will show of our annotations once the
// patch making m carry want is in: the memo must read as the cache would, or
// the next pass renders from a different starting point and writes again.
func (w *Writer) readBack(m *corev1.Service, live, want holdings.Annotations) holdings.Annotations {
	return holdings.Live(holdings.Applied(m.Annotations, want.Patch(live)), w.TargetKeys)
}

// patchService writes our annotations (null removes one: an empty value is
// never written) with a resourceVersion precondition, nothing else.
func (w *Writer) patchService(ctx context.Context, m *corev1.Service, live, a holdings.Annotations) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": m.ResourceVersion,
		"annotations":     a.Patch(live),
	}})
	if err != nil {
		return err
	}
	if _, err := w.Meta.Resource(holdings.ServiceGVR).Namespace(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: permit.FieldManager}); err != nil {
		return fmt.Errorf("patching Service %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

func serviceRef(m *corev1.Service) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Service")
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	u.SetUID(m.UID)
	return u
}
