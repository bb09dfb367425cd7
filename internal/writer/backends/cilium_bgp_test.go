package backends

import (
	"encoding/json"
	"testing"

	"github.com/renumber/renumber/internal/writer/model"
)

func TestRenderAdvertisement(t *testing.T) {
	s := model.Subnet{Name: "Svc_1", Length: 112, Advertise: true, Community: "65000:100"}
	a, err := RenderAdvertisement("home", s, map[string]any{"matchLabels": map[string]any{"pool": "public"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "home-svc-1" || a.Labels["advertise"] != "bgp" || a.Labels[LabelSubnet] != "Svc_1" {
		t.Errorf("name %q labels %v", a.Name, a.Labels)
	}
	b, _ := json.Marshal(a.Spec)
	want := `{"advertisements":[{"advertisementType":"Service","attributes":{"communities":{"standard":["65000:100"]}},"selector":{"matchLabels":{"pool":"public"}},"service":{"addresses":["LoadBalancerIP"]}}]}`
	if string(b) != want {
		t.Errorf("spec:\n got %s\nwant %s", b, want)
	}
}

// TestAPoolsServiceSelectorIsReadWithIt: the selector the advertisement of a
// pool's subnet copies is read when the pool is, not by the pass.
func TestAPoolsServiceSelectorIsReadWithIt(t *testing.T) {
	u := pool("lb", map[string]string{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "public"})
	sel := map[string]any{"matchLabels": map[string]any{"pool": "public"}}
	u.Object["spec"].(map[string]any)["serviceSelector"] = sel
	o, err := poolKind().Read(u)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.(*Pool).Selector; !SameJSON(got, sel) {
		t.Errorf("selector read as %v, want %v", got, sel)
	}
	if o, _ := groupKind().Read(u); o.(*Pool).Selector != nil {
		t.Errorf("a kind without Selects read a selector: %v", o.(*Pool).Selector)
	}
}
