package backends

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// ippool is a Calico IPPool named name holding cidr, with annotations ann
// and labels.
func ippool(name, cidr string, ann, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": name, "resourceVersion": "1"},
		"spec":     map[string]any{"cidr": cidr},
	}}
	u.SetAnnotations(ann)
	u.SetLabels(labels)
	return u
}

// TestAnIPPoolCacheHoldsEachPoolReadOnce: what goes into the IPPool cache is
// read there (ReadIPPool, the informer's transform); a pass finds a
// DynamicPrefix's pools, the siblings draining for it (the existing
// operator's by their parent's annotation) and the pools to release by the
// indexes, and reads none of them again.
func TestAnIPPoolCacheHoldsEachPoolReadOnce(t *testing.T) {
	c := IPPools{Store: NewIPPoolCache()}
	for _, u := range []*unstructured.Unstructured{
		ippool("home-v6", "2001:db8:c::/64", map[string]string{dynamicprefix.AnnotationName: "home", CalicoRecordKey: "2001:db8:c::/64"}, nil),
		ippool("home-v6-2001-db8-b-64", "2001:db8:b::/64", nil,
			MadeFor("home", map[string]string{CalicoLabelManagedBy: CalicoManagedBy, LabelSiblingOf: "home-v6"})),
		// The existing operator's: it drains for its parent's DynamicPrefix,
		// whatever its own label says.
		ippool("home-v6-1a2b3c4d", "2001:db8:a::/64", nil,
			MadeFor("elsewhere", map[string]string{CalicoLabelManagedBy: dynamicprefix.OperatorManagedBy, LabelParentPool: "home-v6"})),
		ippool("let-go", "2001:db8:9::/64", map[string]string{CalicoLegacyRecordKey: "2001:db8:9::/64"}, nil),
		ippool("away-v6", "2001:db8:f::/64", map[string]string{dynamicprefix.AnnotationName: "away"}, nil),
		ippool("users", "10.0.0.0/16", nil, nil),
	} {
		if err := c.Store.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ps []*IPPool) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name())
		}
		return out
	}
	before := Looked()
	got := map[string][]string{}
	for range 3 {
		got = map[string][]string{
			"following home": names(c.Following("home")), "siblings of home": names(c.Siblings("home")),
			"following elsewhere": names(c.Following("elsewhere")), "siblings of elsewhere": names(c.Siblings("elsewhere")),
			"released": names(c.Released()), "siblings of home-v6": names(c.SiblingsOf("home-v6")),
		}
	}
	want := map[string][]string{
		"following home":      {"home-v6"},
		"siblings of home":    {"home-v6-1a2b3c4d", "home-v6-2001-db8-b-64"},
		"released":            {"let-go"},
		"siblings of home-v6": {"home-v6-1a2b3c4d", "home-v6-2001-db8-b-64"},
		// The existing operator's sibling's own label is not what it drains for.
		"following elsewhere": nil, "siblings of elsewhere": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("looked up (-want +got):\n%s", diff)
	}
	if n := Looked() - before; n != 0 {
		t.Errorf("looking the pools up 3 times read %d objects' annotations or labels, want 0", n)
	}
	home, _ := c.Get("home-v6")
	if home.CIDR != "2001:db8:c::/64" || home.Record != "2001:db8:c::/64" || !home.Recorded || home.Follow.DynamicPrefix != "home" {
		t.Errorf("home-v6 read as %+v", home)
	}
	if legacy, _ := c.Get("let-go"); legacy.Record != "2001:db8:9::/64" {
		t.Errorf("the record under the legacy key read as %q", legacy.Record)
	}
}

// TestAnAdvertisementCacheHoldsEachReadOnce: advertisements are found by the
// DynamicPrefix they were made for, ours and the existing operator's told
// apart, without reading one again.
func TestAnAdvertisementCacheHoldsEachReadOnce(t *testing.T) {
	c := Advertisements{Store: NewAdvertisementCache()}
	advert := func(name, managedBy, dp string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
			"metadata": map[string]any{"name": name, "resourceVersion": "1"},
		}}
		u.SetLabels(MadeFor(dp, map[string]string{CiliumLabelManagedBy: managedBy, LabelSubnet: "public"}))
		return u
	}
	for _, u := range []*unstructured.Unstructured{
		advert("home-public", CiliumManagedBy, "home"),
		advert(OperatorAdvertisementName("home", "public"), dynamicprefix.OperatorManagedBy, "home"),
		advert("away-public", CiliumManagedBy, "away"),
	} {
		if err := c.Store.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	before := Looked()
	type seen struct {
		Name          string
		Ours, Adopted bool
	}
	var got []seen
	for range 3 {
		got = nil
		for _, a := range c.MadeFor("home") {
			got = append(got, seen{a.Name(), a.Ours(), a.Adopted("home", "public")})
		}
	}
	want := []seen{{Name: "dp-home-public", Adopted: true}, {Name: "home-public", Ours: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("made for home (-want +got):\n%s", diff)
	}
	if n := Looked() - before; n != 0 {
		t.Errorf("looking the advertisements up 3 times read %d objects' labels, want 0", n)
	}
}
