package backends

import (
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	policyapi "github.com/cilium/cilium/pkg/policy/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// CiliumKinds returns the Cilium pool kinds the API server serves, preferring
// cilium.io/v2 (Discover finds them with the rest, and the
// CiliumBGPAdvertisement resource from the same answer).
func CiliumKinds(disc Discovery) ([]*Kind, error) { return familyOf("cilium.io").discover(disc, nil) }

// PoolResource is the CiliumLoadBalancerIPPool resource.
const PoolResource = "ciliumloadbalancerippools"

func poolKind() *Kind {
	return &Kind{
		Name: "CiliumLoadBalancerIPPool", Resource: PoolResource,
		RecordKey: dynamicprefix.AnnotationManagedBlock, RecordSpelling: holdings.BlockKeys,
		Selects: Selector,
		Entries: func(u *unstructured.Unstructured, _ string) ([]string, error) {
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
		Spec: func(_ string, entries []string) (map[string]any, error) {
			blocks := []ciliumv2.CiliumLoadBalancerIPPoolIPBlock{}
			for _, e := range entries {
				if start, stop, ok := strings.Cut(e, "-"); ok {
					blocks = append(blocks, ciliumv2.CiliumLoadBalancerIPPoolIPBlock{Start: start, Stop: stop})
				} else {
					blocks = append(blocks, ciliumv2.CiliumLoadBalancerIPPoolIPBlock{Cidr: ciliumv2.IPv4orIPv6CIDR(e)})
				}
			}
			return ToMap(map[string]any{"blocks": blocks})
		},
	}
}

func groupKind() *Kind {
	return &Kind{
		Name: "CiliumCIDRGroup", Resource: "ciliumcidrgroups",
		RecordKey: dynamicprefix.AnnotationManagedCIDRs, Form: holdings.CIDRs, AllowList: true,
		Entries: func(u *unstructured.Unstructured, _ string) ([]string, error) {
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
		Spec: func(_ string, entries []string) (map[string]any, error) {
			cidrs := []policyapi.CIDR{}
			for _, e := range entries {
				cidrs = append(cidrs, policyapi.CIDR(e))
			}
			return ToMap(map[string]any{"externalCIDRs": cidrs})
		},
	}
}
