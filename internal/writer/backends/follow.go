// Which DynamicPrefix an object follows, and in what role: the one place the
// writer reads it. The user's objects - pools of every Kind, Calico IPPools,
// Services - follow by their dynamic-prefix.io/name annotation (with the
// optional address-range and subnet beside it); the objects the writer makes
// for a DynamicPrefix - Calico sibling pools, CiliumBGPAdvertisements - carry
// the same key as a label (MadeFor), as the existing operator's do.

package backends

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Role is how an object takes part in following a DynamicPrefix.
type Role int

const (
	// None: the object follows no DynamicPrefix.
	None Role = iota
	// Follower: the user's object; its annotation names the DynamicPrefix.
	Follower
	// Made: an object the writer (or the existing operator) made for the
	// DynamicPrefix its label names.
	Made
)

// follower reads a user's object: its annotation.
func follower(o metav1.Object) (string, Role) {
	looked.Add(1)
	if dp := o.GetAnnotations()[dynamicprefix.AnnotationName]; dp != "" {
		return dp, Follower
	}
	return "", None
}

// made reads an object made for a DynamicPrefix: its label.
func made(o metav1.Object) (string, Role) {
	looked.Add(1)
	if dp := o.GetLabels()[dynamicprefix.AnnotationName]; dp != "" {
		return dp, Made
	}
	return "", None
}

// looked counts the objects whose follow annotation or label was read.
var looked atomic.Int64

// Looked is how many times an object's follow annotation or label has been
// read so far: a test counts those of a pass with it (the caches' transforms
// read them once per change; a pass, never).
func Looked() int64 { return looked.Load() }

// Follows says which DynamicPrefix an object of this kind follows (its
// annotation: pools are the user's).
func (k *Kind) Follows(o metav1.Object) (string, Role) { return follower(o) }

// followKeys are the annotations a user's pool-like object follows by
// (PoolFollowOf reads them): a cache that slims it keeps them.
var followKeys = []string{dynamicprefix.AnnotationName, dynamicprefix.AnnotationAddressRange, dynamicprefix.AnnotationSubnet}

// keepFollowing puts into ann which DynamicPrefix the user's object o
// follows, if it can name one: a cache that keeps nothing else of o still
// knows where to report it.
func keepFollowing(ann map[string]string, o metav1.Object) {
	if dp, _ := follower(o); dp != "" && len(dp) <= validation.DNS1123SubdomainMaxLength {
		ann[dynamicprefix.AnnotationName] = dp
	}
}

// PoolFollowOf reads what a user's pool-like object (a pool of any Kind, a
// Calico IPPool) asks for: the DynamicPrefix, and its address range or
// subnet.
func PoolFollowOf(o metav1.Object) holdings.PoolFollow {
	dp, _ := follower(o)
	a := o.GetAnnotations()
	return holdings.PoolFollow{DynamicPrefix: dp, AddressRange: a[dynamicprefix.AnnotationAddressRange], Subnet: a[dynamicprefix.AnnotationSubnet]}
}

// CalicoFollows says which DynamicPrefix a Calico IPPool follows: a
// sibling's label, the user's pool's annotation.
func CalicoFollows(u *unstructured.Unstructured) (string, Role) {
	if CalicoSibling(u) {
		return made(u)
	}
	return follower(u)
}

// AdvertisementFollows says which DynamicPrefix a CiliumBGPAdvertisement was
// made for (its label).
func AdvertisementFollows(o metav1.Object) (string, Role) { return made(o) }

// ServiceFollows says which DynamicPrefix a Service follows (its annotation;
// holdings.ServiceFollowOf reads it with the rest of what the Service asks for).
func ServiceFollows(s *corev1.Service) (string, Role) { return follower(s) }

// MadeFor are the labels of an object made for the DynamicPrefix dp, with
// the others given.
func MadeFor(dp string, others map[string]string) map[string]string {
	l := map[string]string{dynamicprefix.AnnotationName: dp}
	for k, v := range others {
		l[k] = v
	}
	return l
}
