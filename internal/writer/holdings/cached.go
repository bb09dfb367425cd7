// A Service as the writer's cache keeps it: read once, when it changes
// (ReadService, the Service informer's transform), into what it follows and
// what it carries - a pass reads none of its annotations again.

package holdings

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CachedService is one cached Service, read when it last changed.
type CachedService struct {
	// Service is what the cache keeps of it (Slim): the claims, events and
	// writes name it.
	*corev1.Service
	// Follow is what its annotations ask for.
	Follow ServiceFollow
	// Live is what it carries of ours and the user's entries beside them,
	// read under Keys.
	Live Annotations
	Keys []string
	// Ingress are the addresses its load balancer publishes (as the cache
	// keeps them: at most MaxKeptPublished).
	Ingress []string
	// More are the prefixes of the addresses it publishes past those
	// (BoundedIn: /112s, /64s or prefixes of the space).
	More []netip.Prefix
}

// ReadService slims s (Slim, keeping the target keys keys) and reads it.
func ReadService(s *corev1.Service, keys []string) *CachedService {
	return ReadServiceIn(s, keys, nil)
}

// ReadServiceIn is ReadService with what load balancers publish past the
// bound kept only where it lies in space (BoundedIn).
func ReadServiceIn(s *corev1.Service, keys []string, space []netip.Prefix) *CachedService {
	slim := SlimIn(s, keys, space)
	_, more := BoundedIn(ingressIPs(slim), space)
	return &CachedService{Service: slim, Follow: ServiceFollowOf(slim.Annotations),
		Live: Live(slim.Annotations, keys), Keys: keys, Ingress: Ingress(slim), More: more}
}

// Published is what its load balancer publishes as the cache keeps it:
// Ingress, then More as prefixes (AmongPublished reads both).
func (s *CachedService) Published() []string {
	out := slices.Clone(s.Ingress)
	for _, p := range s.More {
		out = append(out, p.String())
	}
	return out
}

// LiveUnder is what the Service carries of ours with targets under keys: as
// read, when those are the keys it was read under.
func (s *CachedService) LiveUnder(keys []string) Annotations {
	if slices.Equal(keys, s.Keys) {
		return s.Live
	}
	return Live(s.Annotations, keys)
}

// Keep returns the annotations of ann the Service cache keeps (nil if none):
// ours, the target keys asked for, and those its record names (so a key
// dropped from the list can be released).
func Keep(ann map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range slices.Concat(ours, keys, targetKeysRecord(ann[AnnotationManagedTargetKeys])) {
		if v, ok := ann[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// MaxKeptBytes bounds what the Service cache keeps of one Service's
// annotations (Keep). A Service holds a few addresses and targets; anyone who
// may edit it can write 256 KiB. Over the bound the Service is Oversized:
// renumber cannot write it without the whole value, so it leaves it alone.
const MaxKeptBytes = 16 << 10

// MaxEntries bounds the entries (comma-separated, empty ones counted) of
// each address, DNS-target and record annotation on a Service the writer
// writes: the admission policy renumber-writer-sizes refuses it more, so that
// the value policy's evaluation cannot be padded past its cost. The writer
// writes at most 11 addresses; the rest are the user's.
const MaxEntries = 64

// TooManyEntries returns an annotation of ann (as the cache keeps them) with
// more than MaxEntries entries.
func TooManyEntries(ann map[string]string) (string, bool) {
	for k, v := range ann {
		bounded := slices.Contains(AddressKeys, k) || strings.HasSuffix(k, "/target") ||
			k == AnnotationManagedIPs || k == AnnotationManagedTarget || k == AnnotationL2Nudged
		if bounded && strings.Count(v, ",") >= MaxEntries {
			return k, true
		}
	}
	return "", false
}

// oversized marks a Service over MaxKeptBytes in the cache. It is not a valid
// annotation key, so no Service in the API can carry it.
const oversized = "renumber oversized annotations"

// Slim is s as the writer's Service cache keeps it: its identity, the
// annotations Keep keeps (only which DynamicPrefix it follows, and the
// mark, when they total more than MaxKeptBytes) and the IPs of
// status.loadBalancer.ingress, bounded (Bounded: past MaxKeptPublished only
// their /64s, kept as prefix entries no API object can carry).
func Slim(s *corev1.Service, keys []string) *corev1.Service { return SlimIn(s, keys, nil) }

// SlimIn is Slim with the published addresses bounded in space
// (BoundedIn). Slimming a slim Service changes nothing: the Service cache
// slims each Service twice (its list pages, then its transform).
func SlimIn(s *corev1.Service, keys []string, space []netip.Prefix) *corev1.Service {
	out := &corev1.Service{}
	out.Name, out.Namespace, out.ResourceVersion, out.UID = s.Name, s.Namespace, s.ResourceVersion, s.UID
	out.CreationTimestamp = s.CreationTimestamp // who asked first for an address (Conflict)
	if ref := metav1.GetControllerOfNoCopy(s); ref != nil {
		// Whose controller generated it (a Gateway's): such a Service is
		// never written (backends.GeneratedBy).
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	out.Annotations = Keep(s.Annotations, keys)
	size := 0
	for k, v := range out.Annotations {
		size += len(k) + len(v)
	}
	if n, ok := Oversized(s); ok { // slim already: a list page, then the transform
		size = max(n, MaxKeptBytes+1)
	}
	if size > MaxKeptBytes {
		out.Annotations = map[string]string{oversized: strconv.Itoa(size)}
		keepFollowing(out.Annotations, s.Annotations)
	}
	kept, more := BoundedIn(ingressIPs(s), space)
	for _, ip := range kept {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	for _, p := range more {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: p.String()})
	}
	return out
}

// Oversized reports whether the cache kept only the mark of s's annotations
// (Slim), and their size in bytes.
func Oversized(s *corev1.Service) (int, bool) {
	v, ok := s.Annotations[oversized]
	n, _ := strconv.Atoi(v)
	return n, ok
}

// ingressIPs is every IP entry of s's status.loadBalancer.ingress.
func ingressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		}
	}
	return out
}

// Ingress returns the IPs s's status.loadBalancer.ingress publishes, in the
// canonical form we write addresses in.
func Ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}
