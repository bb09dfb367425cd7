package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/writer/aggregate"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/internal/writer/spec"
)

var servicesGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// serviceKeys are the only annotations kept in the Service cache.
var serviceKeys = []string{
	dynamicprefix.AnnotationName, service.AnnotationSuffix, service.AnnotationRange, service.AnnotationSubnet,
	service.AnnotationSkipDNS, service.AnnotationIPs, service.AnnotationTarget,
	service.AnnotationManagedIPs, service.AnnotationManagedTarget,
}

// keepOurAnnotations strips a cached Service down to its identity and the
// annotations renumber reads or owns: clusters with thousands of Services cost
// a few bytes each (the operator we replace spent its memory here).
func keepOurAnnotations(o any) (any, error) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return o, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = m.Name, m.Namespace, m.ResourceVersion, m.UID
	for _, k := range serviceKeys {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out, nil
}

func (r *Reconciler) watchServices() *watched {
	return newWatched("services", servicesGVR, func() cache.SharedIndexInformer {
		inf := metadataInformer(r.meta, servicesGVR)
		_ = inf.SetTransform(keepOurAnnotations)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { r.serviceChanged(o) },
			UpdateFunc: func(old, new any) {
				if old.(*metav1.PartialObjectMetadata).ResourceVersion != new.(*metav1.PartialObjectMetadata).ResourceVersion {
					r.serviceChanged(new)
				}
			},
		})
		return inf
	})
}

func (r *Reconciler) serviceChanged(o any) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	if name := m.Annotations[dynamicprefix.AnnotationName]; name != "" {
		r.enqueue(name, 0)
		return
	}
	_, ips := m.Annotations[service.AnnotationManagedIPs]
	_, targets := m.Annotations[service.AnnotationManagedTarget]
	if ips || targets {
		r.queue.Add("release-svc/" + m.Namespace + "/" + m.Name)
	}
}

func liveAnnotations(m *metav1.PartialObjectMetadata) service.Annotations {
	return service.Annotations{
		IPs:            service.Split(m.Annotations[service.AnnotationIPs]),
		ManagedIPs:     service.Split(m.Annotations[service.AnnotationManagedIPs]),
		Targets:        service.Split(m.Annotations[service.AnnotationTarget]),
		ManagedTargets: service.Split(m.Annotations[service.AnnotationManagedTarget]),
	}
}

// syncServices renders the HA-mode Services following dp.
func (r *Reconciler) syncServices(ctx context.Context, dp *dynamicprefix.DynamicPrefix, model spec.Model, d aggregate.Decision) []error {
	if !model.HA {
		return nil
	}
	var errs []error
	for _, o := range r.services.store().List() {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok || m.Annotations[dynamicprefix.AnnotationName] != dp.Name {
			continue
		}
		key := "services/" + m.Namespace + "/" + m.Name
		live := liveAnnotations(m)
		if w, ok := r.remembered(key, m.ResourceVersion); ok {
			live = w.(service.Annotations)
		}
		want, err := service.Render(model, service.FollowOf(m.Annotations), d.Pooled, live)
		if err != nil {
			err = fmt.Errorf("service %s/%s: %w", m.Namespace, m.Name, err)
			r.announce("svc/"+key, serviceRef(m), true, "InvalidServiceAnnotations", err.Error())
			errs = append(errs, err)
			continue
		}
		if sameAnnotations(want, live) {
			r.calm(key, dp.Name)
			continue
		}
		if err := r.permit(key, serviceRef(m), dp.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.patchService(ctx, m, want); err != nil {
			errs = append(errs, err)
			continue
		}
		r.remember(key, m.ResourceVersion, want)
		metricWrites.With("services").Inc()
		r.log.Info(fmt.Sprintf("Service %s/%s addresses updated", m.Namespace, m.Name), "ips", want.ManagedIPs, "dns", want.ManagedTargets)
	}
	return errs
}

func (r *Reconciler) releaseService(ctx context.Context, ns, name string) error {
	o, exists, err := r.services.store().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return err
	}
	m := o.(*metav1.PartialObjectMetadata)
	if m.Annotations[dynamicprefix.AnnotationName] != "" {
		return nil
	}
	key := "services/" + ns + "/" + name
	if _, ok := r.remembered(key, m.ResourceVersion); ok {
		return nil
	}
	want := service.Release(liveAnnotations(m))
	if err := r.patchService(ctx, m, want); err != nil {
		return err
	}
	r.remember(key, m.ResourceVersion, want)
	metricWrites.With("services").Inc()
	r.log.Info(fmt.Sprintf("Service %s/%s released", ns, name))
	return nil
}

func sameAnnotations(a, b service.Annotations) bool {
	return slices.Equal(a.IPs, b.IPs) && slices.Equal(a.ManagedIPs, b.ManagedIPs) &&
		slices.Equal(a.Targets, b.Targets) && slices.Equal(a.ManagedTargets, b.ManagedTargets)
}

// patchService writes the four annotations (null removes one: an empty value is
// never written) with a resourceVersion precondition, nothing else.
func (r *Reconciler) patchService(ctx context.Context, m *metav1.PartialObjectMetadata, a service.Annotations) error {
	val := func(v []string) any {
		if len(v) == 0 {
			return nil
		}
		return strings.Join(v, ",")
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": m.ResourceVersion,
		"annotations": map[string]any{
			service.AnnotationIPs: val(a.IPs), service.AnnotationManagedIPs: val(a.ManagedIPs),
			service.AnnotationTarget: val(a.Targets), service.AnnotationManagedTarget: val(a.ManagedTargets),
		},
	}})
	if err != nil {
		return err
	}
	if _, err := r.meta.Resource(servicesGVR).Namespace(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "renumber-writer"}); err != nil {
		return fmt.Errorf("patching Service %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

func serviceRef(m *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Service")
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	u.SetUID(m.UID)
	return u
}
