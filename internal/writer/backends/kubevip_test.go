package backends

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/render"
)

func kubevipConfigMap(key string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
	u.SetNamespace("kube-system")
	u.SetName("kubevip")
	u.SetAnnotations(map[string]string{dynamicprefix.AnnotationName: "home", AnnotationKubeVIPKey: key})
	return u
}

// The key the annotation names says where our entries go and in which form
// the provider parses them; the other keys are not read.
func TestTheAnnotatedKeyIsThePool(t *testing.T) {
	k := KubeVIPKind(DefaultKubeVIPConfigMap)
	data := map[string]any{"cidr-global": "192.0.2.0/28, 2001:db8:9::/120", "range-default": "192.0.2.100-192.0.2.110"}
	for key, want := range map[string]struct {
		form    render.Form
		entries []string
	}{
		"cidr-global":   {render.CIDRs, []string{"192.0.2.0/28", "2001:db8:9::/120"}},
		"range-default": {render.Ranges, []string{"192.0.2.100-192.0.2.110"}},
		"range-web":     {render.Ranges, nil},
	} {
		o, ours, err := k.Decode(kubevipConfigMap(key, data))
		if err != nil || !ours || o.Slot != key || o.Form != want.form || !slices.Equal(o.Entries, want.entries) {
			t.Errorf("%s: %+v ours=%v err=%v; want form %v entries %q", key, o, ours, err, want.form, want.entries)
		}
	}
	for _, bad := range []string{"", "global", "cidr-", "range-Not_A_Namespace", "cidrglobal"} {
		if _, _, err := k.Decode(kubevipConfigMap(bad, data)); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	spec, _ := k.Spec("cidr-global", []string{"192.0.2.0/28", "2001:db8:1:100::/64"})
	if spec["cidr-global"] != "192.0.2.0/28,2001:db8:1:100::/64" || len(spec) != 1 {
		t.Errorf("spec = %v", spec)
	}
	if spec, _ := k.Spec("cidr-global", nil); spec["cidr-global"] != nil {
		t.Errorf("an empty pool is written as %v, want the key removed", spec)
	}
	if s := k.Scope(); s.Namespace != "kube-system" || s.Fields != "metadata.name=kubevip" {
		t.Errorf("scope %+v: want the one ConfigMap", s)
	}
}

func TestCheckConfigMap(t *testing.T) {
	for _, ok := range []string{DefaultKubeVIPConfigMap, "lb/kube-vip.pools"} {
		if err := CheckKubeVIPConfigMap(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"kubevip", "/kubevip", "kube-system/", "Kube_System/kubevip"} {
		if CheckKubeVIPConfigMap(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
