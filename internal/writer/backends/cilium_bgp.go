package backends

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	ciliumv2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	slimv1 "github.com/cilium/cilium/pkg/k8s/slim/k8s/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/model"
)

// Labels on every CiliumBGPAdvertisement renumber owns. "advertise: bgp" is what
// Cilium's documented CiliumBGPPeerConfig examples select.
const (
	CiliumLabelManagedBy = "app.kubernetes.io/managed-by"
	CiliumManagedBy      = "renumber"
	LabelSubnet          = "dynamic-prefix.io/subnet"
)

// bgpResourceName is the CiliumBGPAdvertisement resource.
const bgpResourceName = "ciliumbgpadvertisements"

// bgpResource is the CiliumBGPAdvertisement resource, empty if not served (v2
// only: v2alpha1 advertisements belong to Cilium's older BGP control plane).
// served is what Served returned for cilium.io, v2 winning over v2alpha1.
func bgpResource(served map[string]string) schema.GroupVersionResource {
	if served[bgpResourceName] != "v2" {
		return schema.GroupVersionResource{}
	}
	return schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: bgpResourceName}
}

// Advertisement is one desired CiliumBGPAdvertisement.
type Advertisement struct {
	Name   string
	Labels map[string]string
	Spec   map[string]any
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// AdvertisementName is the object name for a DynamicPrefix's subnet.
func AdvertisementName(dp, subnet string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(dp+"-"+subnet), "-"), "-")
	if len(n) > 253 {
		n = n[:253]
	}
	return n
}

// RenderAdvertisement builds the advertisement for one advertised subnet: the
// LoadBalancer IPs of the Services the pool using the subnet selects, with the
// subnet's community, labelled for a CiliumBGPPeerConfig to select.
func RenderAdvertisement(dp string, s model.Subnet, poolSelector map[string]any) (Advertisement, error) {
	adv := ciliumv2.BGPAdvertisement{
		AdvertisementType: ciliumv2.BGPServiceAdvert,
		Service:           &ciliumv2.BGPServiceOptions{Addresses: []ciliumv2.BGPServiceAddressType{ciliumv2.BGPLoadBalancerIPAddr}},
	}
	if poolSelector != nil {
		b, err := json.Marshal(poolSelector)
		if err != nil {
			return Advertisement{}, err
		}
		var sel slimv1.LabelSelector
		if err := json.Unmarshal(b, &sel); err != nil {
			return Advertisement{}, fmt.Errorf("pool serviceSelector: %w", err)
		}
		adv.Selector = &sel
	}
	if s.Community != "" {
		adv.Attributes = &ciliumv2.BGPAttributes{Communities: &ciliumv2.BGPCommunities{
			Standard: []ciliumv2.BGPStandardCommunity{ciliumv2.BGPStandardCommunity(s.Community)}}}
	}
	spec, err := ToMap(ciliumv2.CiliumBGPAdvertisementSpec{Advertisements: []ciliumv2.BGPAdvertisement{adv}})
	if err != nil {
		return Advertisement{}, err
	}
	return Advertisement{
		Name:   AdvertisementName(dp, s.Name),
		Labels: MadeFor(dp, map[string]string{"advertise": "bgp", CiliumLabelManagedBy: CiliumManagedBy, LabelSubnet: s.Name}),
		Spec:   spec,
	}, nil
}

// OperatorAdvertisementName is the name the existing operator gives the
// advertisement of dp's subnet; it labels it managed-by
// dynamicprefix.OperatorManagedBy, with the DynamicPrefix and the subnet.
func OperatorAdvertisementName(dp, subnet string) string { return "dp-" + dp + "-" + subnet }

// Selector returns a pool's spec.serviceSelector (nil if none).
func Selector(u *unstructured.Unstructured) map[string]any {
	sel, _, _ := unstructured.NestedMap(u.Object, "spec", "serviceSelector")
	return sel
}
