// A Service as the writer's cache keeps it: read once, when it changes
// (ReadService, the Service informer's transform), into what it follows and
// what it carries - a pass reads none of its annotations again.

package render

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
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
	// Ingress are the addresses its load balancer publishes.
	Ingress []string
}

// ReadService slims s (Slim, keeping the target keys keys) and reads it.
func ReadService(s *corev1.Service, keys []string) *CachedService {
	slim := Slim(s, keys)
	return &CachedService{Service: slim, Follow: ServiceFollowOf(slim.Annotations),
		Live: Live(slim.Annotations, keys), Keys: keys, Ingress: Ingress(slim)}
}

// LiveUnder is what the Service carries of ours with targets under keys: as
// read, when those are the keys it was read under.
func (s *CachedService) LiveUnder(keys []string) Annotations {
	if slices.Equal(keys, s.Keys) {
		return s.Live
	}
	return Live(s.Annotations, keys)
}
