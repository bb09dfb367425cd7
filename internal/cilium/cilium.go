package cilium

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	policyapi "github.com/cilium/cilium/pkg/policy/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/pool"
)

// Kind is one Cilium resource that can follow a DynamicPrefix.
type Kind struct {
	Name      string // for logs and events
	Resource  string
	GVR       schema.GroupVersionResource
	RecordKey string
	// CIDROnly: entries must be CIDRs (CIDR groups have no ranges).
	CIDROnly bool
	decode   func(*unstructured.Unstructured) ([]string, error)
	body     func([]string) (map[string]any, error)
}

// Object is one pool-like object, backend-neutral.
type Object struct {
	Kind            *Kind
	Name            string
	ResourceVersion string
	Follow          pool.Follow
	Entries         []string
	Record          []string
	HasRecord       bool
}

// Kinds returns the Cilium kinds the API server serves, preferring cilium.io/v2.
func Kinds(disc discovery.DiscoveryInterface) ([]*Kind, error) {
	served := map[string]string{} // resource -> version
	for _, v := range []string{"v2alpha1", "v2"} {
		list, err := disc.ServerResourcesForGroupVersion("cilium.io/" + v)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			served[r.Name] = v
		}
	}
	var out []*Kind
	for _, k := range []*Kind{poolKind(), groupKind()} {
		if v, ok := served[k.Resource]; ok {
			k.GVR = schema.GroupVersionResource{Group: "cilium.io", Version: v, Resource: k.Resource}
			out = append(out, k)
		}
	}
	return out, nil
}

func poolKind() *Kind {
	return &Kind{
		Name: "CiliumLoadBalancerIPPool", Resource: "ciliumloadbalancerippools",
		RecordKey: dynamicprefix.AnnotationManagedBlock,
		decode: func(u *unstructured.Unstructured) ([]string, error) {
			var p ciliumv2.CiliumLoadBalancerIPPool
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
				return nil, err
			}
			var out []string
			for _, b := range p.Spec.Blocks {
				if b.Cidr != "" {
					out = append(out, string(b.Cidr))
				} else {
					out = append(out, b.Start+"-"+b.Stop)
				}
			}
			return out, nil
		},
		body: func(entries []string) (map[string]any, error) {
			blocks := []ciliumv2.CiliumLoadBalancerIPPoolIPBlock{}
			for _, e := range entries {
				if start, stop, ok := strings.Cut(e, "-"); ok {
					blocks = append(blocks, ciliumv2.CiliumLoadBalancerIPPoolIPBlock{Start: start, Stop: stop})
				} else {
					blocks = append(blocks, ciliumv2.CiliumLoadBalancerIPPoolIPBlock{Cidr: ciliumv2.IPv4orIPv6CIDR(e)})
				}
			}
			return toMap(map[string]any{"blocks": blocks})
		},
	}
}

func groupKind() *Kind {
	return &Kind{
		Name: "CiliumCIDRGroup", Resource: "ciliumcidrgroups",
		RecordKey: dynamicprefix.AnnotationManagedCIDRs, CIDROnly: true,
		decode: func(u *unstructured.Unstructured) ([]string, error) {
			var g ciliumv2.CiliumCIDRGroup
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &g); err != nil {
				return nil, err
			}
			var out []string
			for _, c := range g.Spec.ExternalCIDRs {
				out = append(out, string(c))
			}
			return out, nil
		},
		body: func(entries []string) (map[string]any, error) {
			cidrs := []policyapi.CIDR{}
			for _, e := range entries {
				cidrs = append(cidrs, policyapi.CIDR(e))
			}
			return toMap(map[string]any{"externalCIDRs": cidrs})
		},
	}
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// Decode reads an object of this kind. Objects that neither follow a
// DynamicPrefix nor carry our record are not ours (ok false).
func (k *Kind) Decode(u *unstructured.Unstructured) (Object, bool, error) {
	ann := u.GetAnnotations()
	rec, hasRecord := ann[k.RecordKey]
	name := ann[dynamicprefix.AnnotationName]
	if name == "" && !hasRecord {
		return Object{}, false, nil
	}
	entries, err := k.decode(u)
	if err != nil {
		return Object{}, true, fmt.Errorf("decoding %s %q: %w", k.Name, u.GetName(), err)
	}
	return Object{
		Kind: k, Name: u.GetName(), ResourceVersion: u.GetResourceVersion(),
		Follow: pool.Follow{
			DynamicPrefix: name,
			AddressRange:  ann[dynamicprefix.AnnotationAddressRange],
			Subnet:        ann[dynamicprefix.AnnotationSubnet],
		},
		Entries: entries, Record: pool.ParseRecord(rec), HasRecord: hasRecord,
	}, true, nil
}

// Patch writes entries and the ownership record (removed when record is nil)
// with a merge patch of only those two fields, conditional on the resource
// version the entries were computed from: a concurrent edit by someone else is a
// conflict to retry, never overwritten.
func (k *Kind) Patch(ctx context.Context, client dynamic.Interface, o Object, entries, record []string) error {
	spec, err := k.body(entries)
	if err != nil {
		return err
	}
	var rec any
	if record != nil {
		rec = pool.FormatRecord(record)
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": o.ResourceVersion, "annotations": map[string]any{k.RecordKey: rec}},
		"spec":     spec,
	})
	if err != nil {
		return err
	}
	if _, err := client.Resource(k.GVR).Patch(ctx, o.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "renumber-writer"}); err != nil {
		return fmt.Errorf("patching %s %q: %w", k.Name, o.Name, err)
	}
	return nil
}
