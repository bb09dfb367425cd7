// Package kubevip describes the kube-vip cloud provider's pool ConfigMap as a
// backend.Kind. The provider reads keys cidr-<namespace> / cidr-global
// (comma-separated CIDRs) and range-<namespace> / range-global
// (comma-separated "first-last" ranges). The one key we manage is the one the
// ConfigMap's dynamic-prefix.io/kubevip-key annotation names; no other key is
// read or written. Opt-in: the writer follows this ConfigMap only when told
// its name, and RBAC allows it no other.
package kubevip

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/backend"
	"github.com/renumber/renumber/internal/writer/render"
)

const (
	// AnnotationKey names the ConfigMap key whose entries follow the
	// DynamicPrefix.
	AnnotationKey = "dynamic-prefix.io/kubevip-key"
	// AnnotationRecord records the entries we wrote into that key (the
	// existing operator's record; renumber wrote managed-addresses before).
	AnnotationRecord = "dynamic-prefix.io/managed-kubevip-entries"
	// DefaultConfigMap is where the kube-vip cloud provider looks by default.
	DefaultConfigMap = "kube-system/kubevip"
)

// GVR is the ConfigMap resource.
var GVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// CheckConfigMap refuses a reference that is not "namespace/name".
func CheckConfigMap(ref string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("kube-vip ConfigMap %q: want namespace/name", ref)
	}
	return nil
}

// Kind is the ConfigMap ref ("namespace/name") as a pool.
func Kind(ref string) *backend.Kind {
	return &backend.Kind{
		Name: "kube-vip ConfigMap", Resource: GVR.Resource, GVR: GVR, Namespaced: true, Only: ref,
		RecordKey: AnnotationRecord, LegacyRecordKeys: []string{dynamicprefix.AnnotationManagedAddresses}, Top: "data",
		Slot: slot, Entries: entries,
		Spec: func(key string, entries []string) (map[string]any, error) {
			if len(entries) == 0 {
				return map[string]any{key: nil}, nil // no empty pool left behind
			}
			return map[string]any{key: strings.Join(entries, ",")}, nil
		},
	}
}

// slot reads which key to manage and the form the provider parses there.
func slot(u *unstructured.Unstructured) (string, render.Form, error) {
	key := u.GetAnnotations()[AnnotationKey]
	ns, form := "", render.Any
	switch {
	case strings.HasPrefix(key, "cidr-"):
		ns, form = strings.TrimPrefix(key, "cidr-"), render.CIDRs
	case strings.HasPrefix(key, "range-"):
		ns, form = strings.TrimPrefix(key, "range-"), render.Ranges
	}
	if form == render.Any || len(validation.IsDNS1123Label(ns)) > 0 {
		return "", 0, fmt.Errorf("%s %q: want cidr-<namespace>, cidr-global, range-<namespace> or range-global", AnnotationKey, key)
	}
	return key, form, nil
}

// entries reads the key's comma-separated entries verbatim.
func entries(u *unstructured.Unstructured, key string) ([]string, error) {
	v, _, err := unstructured.NestedString(u.Object, "data", key)
	if err != nil {
		return nil, err
	}
	return render.Split(v), nil
}
