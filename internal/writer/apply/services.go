package apply

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/aggregate"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/informer"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/internal/writer/spec"
)

// Services writes the HA-mode Services (from the Service cache) that follow
// model's DynamicPrefix; in transition mode simple, it releases them.
func (w *Writer) Services(ctx context.Context, services cache.Store, model spec.Model, d aggregate.Decision) Outcomes {
	var out Outcomes
	if !model.HA {
		for _, o := range services.List() {
			if m := o.(*corev1.Service); m.Annotations[dynamicprefix.AnnotationName] == model.Name {
				out = append(out, w.ReleaseService(ctx, services, m.Namespace, m.Name, model.Name))
			}
		}
		return out
	}
	opt := service.Options{TargetKeys: w.TargetKeys, L2Nudge: w.L2Nudge != nil && w.L2Nudge()}
	for _, o := range services.List() {
		m, ok := o.(*corev1.Service)
		if !ok || m.Annotations[dynamicprefix.AnnotationName] != model.Name {
			continue
		}
		self := object{resource: "services", namespace: m.Namespace, name: m.Name}
		live := service.Live(m.Annotations, w.TargetKeys)
		if last, ok := w.services.get(self, m.ResourceVersion); ok {
			live = last
		}
		ingress := service.Ingress(m)
		want, err := service.Render(model, service.FollowOf(m.Annotations), d.Pooled, live, ingress, opt)
		if err != nil {
			err = fmt.Errorf("service %s/%s: %w", m.Namespace, m.Name, err)
			w.Events.Announce("svc/"+self.String(), serviceRef(m), true, "InvalidServiceAnnotations", err.Error())
			out = append(out, Final(err))
			continue
		}
		if want.Equal(live) {
			w.calm(self, model.Name)
			continue
		}
		if w.shadow(annotationChanges(self, m.Annotations, want.Patch(live))...) {
			continue
		}
		if err := w.permit(self, serviceRef(m), model.Name); err != nil {
			out = append(out, Final(err))
			continue
		}
		if err := w.patchService(ctx, m, live, want); err != nil {
			out = append(out, Transient(err))
			continue
		}
		w.services.put(self, m.ResourceVersion, w.readBack(m, live, want))
		metricWrites.With("services").Inc()
		w.Log.Info(fmt.Sprintf("Service %s/%s addresses updated", m.Namespace, m.Name), "ips", want.ManagedIPs, "dns", want.ManagedTargets, "l2_nudged", want.L2Nudged)
	}
	return out
}

// ReleaseService removes our addresses and records from the Service ns/name
// when it names dp: "" once its dynamic-prefix.io/name annotation was removed,
// or a DynamicPrefix that was deleted or went back to transition mode simple.
// The user's entries stay.
func (w *Writer) ReleaseService(ctx context.Context, services cache.Store, ns, name, dp string) Outcome {
	o, exists, err := services.GetByKey(informer.Key(ns, name))
	if err != nil || !exists {
		return Transient(err)
	}
	m := o.(*corev1.Service)
	live := service.Live(m.Annotations, w.TargetKeys)
	if m.Annotations[dynamicprefix.AnnotationName] != dp || !live.Owned() {
		return Outcome{}
	}
	self := object{resource: "services", namespace: ns, name: name}
	if _, ok := w.services.get(self, m.ResourceVersion); ok {
		return Outcome{}
	}
	want := service.Release(live)
	if w.shadow(annotationChanges(self, m.Annotations, want.Patch(live))...) {
		return Outcome{}
	}
	if err := w.patchService(ctx, m, live, want); err != nil {
		return Transient(err)
	}
	w.services.put(self, m.ResourceVersion, w.readBack(m, live, want))
	metricWrites.With("services").Inc()
	why := "dynamic-prefix.io/name removed"
	if dp != "" {
		why = fmt.Sprintf("DynamicPrefix %s deleted or in transition mode simple", dp)
	}
	w.Log.Info(fmt.Sprintf("Service %s/%s released", ns, name), "why", why)
	w.Events.Event(serviceRef(m), "ServiceReleased", why+": managed addresses, targets and records removed")
	return Outcome{}
}

// readBack is what the Service cache will show of our annotations once the
// patch making m carry want is in: the memo must read as the cache would, or
// the next pass renders from a different starting point and writes again.
func (w *Writer) readBack(m *corev1.Service, live, want service.Annotations) service.Annotations {
	return service.Live(service.Applied(m.Annotations, want.Patch(live)), w.TargetKeys)
}

// patchService writes our annotations (null removes one: an empty value is
// never written) with a resourceVersion precondition, nothing else.
func (w *Writer) patchService(ctx context.Context, m *corev1.Service, live, a service.Annotations) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": m.ResourceVersion,
		"annotations":     a.Patch(live),
	}})
	if err != nil {
		return err
	}
	if _, err := w.Meta.Resource(service.GVR).Namespace(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
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
