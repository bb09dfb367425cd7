// What a Service asks for (ServiceFollow, read once by ServiceFollowOf) and
// the annotations it is read and written under.

package holdings

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

// Annotations read and written on Services.
const (
	AnnotationSuffix  = "dynamic-prefix.io/suffix"
	AnnotationRange   = "dynamic-prefix.io/service-address-range"
	AnnotationSubnet  = "dynamic-prefix.io/service-subnet"
	AnnotationSkipDNS = "dynamic-prefix.io/skip-external-dns-update"
	// AnnotationSkipL2Nudge / AnnotationForceL2Nudge: "true" overrides, for one
	// Service, whether it gets the L2 announcer nudge (ServiceOptions.L2Nudge).
	AnnotationSkipL2Nudge  = "dynamic-prefix.io/skip-l2-nudge"
	AnnotationForceL2Nudge = "dynamic-prefix.io/force-l2-nudge"
	// AnnotationL2Nudged is the nudge: the managed addresses the load balancer
	// published when we last touched the Service for Cilium's L2 announcer.
	AnnotationIPs        = "lbipam.cilium.io/ips"
	AnnotationManagedIPs = "dynamic-prefix.io/managed-ips"
	// AnnotationProvider chooses the load balancer that gets the addresses:
	// cilium (the default: AnnotationIPs) or kube-vip (AnnotationKubeVIPIPs).
	AnnotationProvider = "dynamic-prefix.io/lb-provider"
	// AnnotationKubeVIPIPs is what the kube-vip cloud provider and kube-vip
	// read for the addresses a Service asks for.
	AnnotationKubeVIPIPs = "kube-vip.io/loadbalancerIPs"
	// AnnotationManagedIPsKey records the key the managed addresses were
	// written under when it is not AnnotationIPs (so a Service that never
	// left Cilium carries no such record, and upgrading costs no write).
	AnnotationManagedIPsKey = "dynamic-prefix.io/managed-ips-key"
	AnnotationManagedTarget = "dynamic-prefix.io/managed-targets"
	AnnotationL2Nudged      = "dynamic-prefix.io/l2-nudged"
	// AnnotationManagedTargetKeys records the target keys we wrote the
	// managed targets under. Absent with managed targets present: the alpha
	// key alone (what was written before keys could be chosen).
	AnnotationManagedTargetKeys = "dynamic-prefix.io/managed-target-keys"

	// AnnotationMapping asks for the Service's DNS target to be the address
	// its router maps its load-balancer address to (model.MappingNPTv6 or
	// model.MappingNetmap), from the prefix AnnotationMappingPrefix onto the
	// followed DynamicPrefix's (renumber additions). The Service's own
	// address is never written.
	AnnotationMapping       = "dynamic-prefix.io/mapping"
	AnnotationMappingPrefix = "dynamic-prefix.io/mapping-prefix"

	// AnnotationTarget is the key external-dns v0.22 and later read by default.
	AnnotationTarget = "external-dns.kubernetes.io/target"
	// AnnotationTargetAlpha is the key external-dns read before v0.22.
	AnnotationTargetAlpha = "external-dns.alpha.kubernetes.io/target"
)

// DefaultTargetKeys are the keys the target is written under unless told
// otherwise: both spellings, so a cluster keeps resolving across an
// external-dns upgrade.
var DefaultTargetKeys = []string{AnnotationTarget, AnnotationTargetAlpha}

// CheckTargetKeys refuses keys that are not annotation keys, repeat, or
// collide with an annotation renumber reads or owns.
func CheckTargetKeys(keys []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		if problems := validation.IsQualifiedName(k); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("target key %q is not an annotation key: %s", k, strings.Join(problems, "; ")))
		}
		if seen[k] {
			errs = append(errs, fmt.Errorf("target key %q is listed twice", k))
		}
		seen[k] = true
		if slices.Contains(AddressKeys, k) || strings.HasPrefix(k, "dynamic-prefix.io/") {
			errs = append(errs, fmt.Errorf("target key %q is an annotation renumber reads or owns", k))
		}
	}
	return errors.Join(errs...)
}

// ServiceGVR is the Service resource.
var ServiceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// ServiceFollow is what a Service's annotations ask for.
type ServiceFollow struct {
	DynamicPrefix string
	Suffix        string
	Range         string
	Subnet        string
	Provider      string
	SkipDNS       bool
	SkipL2Nudge   bool
	ForceL2Nudge  bool
	// Mapping, MappingPrefix: the DNS target is the load-balancer address
	// mapped from MappingPrefix (AnnotationMapping).
	Mapping       string
	MappingPrefix string
}

// ServiceFollowOf reads a Service's annotations.
func ServiceFollowOf(ann map[string]string) ServiceFollow {
	serviceReads.Add(1)
	return ServiceFollow{
		DynamicPrefix: ann[dynamicprefix.AnnotationName],
		Suffix:        ann[AnnotationSuffix],
		Range:         ann[AnnotationRange],
		Subnet:        ann[AnnotationSubnet],
		Provider:      ann[AnnotationProvider],
		SkipDNS:       ann[AnnotationSkipDNS] == "true",
		SkipL2Nudge:   ann[AnnotationSkipL2Nudge] == "true",
		ForceL2Nudge:  ann[AnnotationForceL2Nudge] == "true",
		Mapping:       ann[AnnotationMapping],
		MappingPrefix: ann[AnnotationMappingPrefix],
	}
}

// ours are the annotations renumber reads or owns on every Service; the
// alpha key is one too, for Services written before the keys record existed.
var ours = []string{dynamicprefix.AnnotationName, AnnotationSuffix, AnnotationRange, AnnotationSubnet, AnnotationSkipDNS,
	AnnotationSkipL2Nudge, AnnotationForceL2Nudge, AnnotationProvider, AnnotationIPs, AnnotationKubeVIPIPs,
	AnnotationManagedIPs, AnnotationManagedIPsKey, AnnotationManagedTarget, AnnotationManagedTargetKeys,
	AnnotationL2Nudged, AnnotationTargetAlpha, AnnotationMapping, AnnotationMappingPrefix}

// keepFollowing puts into kept which DynamicPrefix the annotations ann
// follow, if they can name one: a cache that keeps nothing else of a
// Service still knows where to report it.
func keepFollowing(kept, ann map[string]string) {
	if dp := ann[dynamicprefix.AnnotationName]; len(dp) <= validation.DNS1123SubdomainMaxLength {
		kept[dynamicprefix.AnnotationName] = dp
	}
}

// serviceReads counts the Services ServiceFollowOf read.
var serviceReads atomic.Int64

// ServicesRead is how many Services ServiceFollowOf has read so far: a test
// and the writer's benchmark count the reads of a pass with it.
func ServicesRead() int64 { return serviceReads.Load() }

// AddressKeys are the annotations a load balancer reads a Service's addresses
// from: Cilium's, then kube-vip's.
var AddressKeys = []string{AnnotationIPs, AnnotationKubeVIPIPs}

// AddressKey is the annotation the Service's provider reads its addresses
// from. Errors wrap model.ErrInvalid.
func (f ServiceFollow) AddressKey() (string, error) {
	switch f.Provider {
	case "", "cilium":
		return AnnotationIPs, nil
	case "kube-vip":
		return AnnotationKubeVIPIPs, nil
	}
	return "", fmt.Errorf("%w: %s %q: want cilium or kube-vip", model.ErrInvalid, AnnotationProvider, f.Provider)
}
