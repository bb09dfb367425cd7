package backends

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
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
		form    holdings.Form
		entries []string
	}{
		"cidr-global":   {holdings.CIDRs, []string{"192.0.2.0/28", "2001:db8:9::/120"}},
		"range-default": {holdings.Ranges, []string{"192.0.2.100-192.0.2.110"}},
		"range-web":     {holdings.Ranges, nil},
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

// The ConfigMap is the user's (and kube-vip's): whatever its annotation and
// data say, decoding never panics, a key it accepts is a cidr- or range- key
// with a namespace name, its entries are the value's entries verbatim, and
// what the writer would write there reads back as written.
func FuzzKubeVIPConfigMap(f *testing.F) {
	f.Add("cidr-global", "192.0.2.0/28, 2001:db8:9::/120", "2001:db8:b::/64")
	f.Add("range-default", "192.0.2.100-192.0.2.110,,", "2001:db8:b::1-2001:db8:b::ff")
	f.Add("range-Not_A_Namespace", ",", "")
	f.Fuzz(func(t *testing.T, key, value, ours string) {
		k := KubeVIPKind(DefaultKubeVIPConfigMap)
		o, _, err := k.Decode(kubevipConfigMap(key, map[string]any{key: value, "other": value}))
		if err != nil {
			return
		}
		if !strings.HasPrefix(o.Slot, "cidr-") && !strings.HasPrefix(o.Slot, "range-") {
			t.Fatalf("accepted key %q", o.Slot)
		}
		if !slices.Equal(o.Entries, holdings.Split(value)) {
			t.Errorf("entries %q from %q", o.Entries, value)
		}
		entries, _ := holdings.Merge(o.Entries, nil, holdings.Split(ours))
		spec, err := k.Spec(o.Slot, entries)
		if err != nil {
			t.Fatal(err)
		}
		written := kubevipConfigMap(key, spec)
		if v, ok := spec[key].(string); ok {
			written = kubevipConfigMap(key, map[string]any{key: v})
		}
		back, _, err := k.Decode(written)
		if err != nil || !slices.Equal(back.Entries, entries) {
			t.Errorf("wrote %q, read back %q (%v)", entries, back.Entries, err)
		}
	})
}
