// KubeVIPKind describes the kube-vip cloud provider's pool ConfigMap as a
// Kind. The provider reads keys cidr-<namespace> / cidr-global
// (comma-separated CIDRs) and range-<namespace> / range-global
// (comma-separated "first-last" ranges). The one key we manage is the one the
// ConfigMap's dynamic-prefix.io/kubevip-key annotation names; no other key is
// read or written. Opt-in: the writer follows this ConfigMap only when told
// its name, and RBAC allows it no other.

package backends

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
)

const (
	// AnnotationKubeVIPKey names the ConfigMap key whose entries follow the
	// DynamicPrefix.
	AnnotationKubeVIPKey = "dynamic-prefix.io/kubevip-key"
	// AnnotationKubeVIPRecord records the entries we wrote into that key (the
	// existing operator's record; renumber wrote managed-addresses before).
	AnnotationKubeVIPRecord = "dynamic-prefix.io/managed-kubevip-entries"
	// DefaultKubeVIPConfigMap is where the kube-vip cloud provider looks by default.
	DefaultKubeVIPConfigMap = "kube-system/kubevip"
)

// ConfigMapGVR is the ConfigMap resource.
var ConfigMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// CheckKubeVIPConfigMap refuses a reference that is not "namespace/name".
func CheckKubeVIPConfigMap(ref string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("kube-vip ConfigMap %q: want namespace/name", ref)
	}
	return nil
}

// KubeVIPKind is the ConfigMap ref ("namespace/name") as a pool.
func KubeVIPKind(ref string) *Kind {
	return &Kind{
		Name: "kube-vip ConfigMap", Resource: ConfigMapGVR.Resource, GVR: ConfigMapGVR, Namespaced: true, Only: ref,
		RecordKey: AnnotationKubeVIPRecord, LegacyRecordKeys: []string{dynamicprefix.AnnotationManagedAddresses}, Top: "data",
		Slot: kubevipSlot, Entries: kubevipEntries,
		Spec: func(key string, kubevipEntries []string) (map[string]any, error) {
			if len(kubevipEntries) == 0 {
				return map[string]any{key: nil}, nil // no empty pool left behind
			}
			return map[string]any{key: strings.Join(kubevipEntries, ",")}, nil
		},
	}
}

// kubevipSlot reads which key to manage and the form the provider parses there.
func kubevipSlot(u *unstructured.Unstructured) (string, holdings.Form, error) {
	key := u.GetAnnotations()[AnnotationKubeVIPKey]
	ns, form := "", holdings.Any
	switch {
	case strings.HasPrefix(key, "cidr-"):
		ns, form = strings.TrimPrefix(key, "cidr-"), holdings.CIDRs
	case strings.HasPrefix(key, "range-"):
		ns, form = strings.TrimPrefix(key, "range-"), holdings.Ranges
	}
	if form == holdings.Any || len(validation.IsDNS1123Label(ns)) > 0 {
		return "", 0, fmt.Errorf("%s %q: want cidr-<namespace>, cidr-global, range-<namespace> or range-global", AnnotationKubeVIPKey, key)
	}
	return key, form, nil
}

// kubevipEntries reads the key's comma-separated entries verbatim.
func kubevipEntries(u *unstructured.Unstructured, key string) ([]string, error) {
	v, _, err := unstructured.NestedString(u.Object, "data", key)
	if err != nil {
		return nil, err
	}
	return holdings.Split(v), nil
}
