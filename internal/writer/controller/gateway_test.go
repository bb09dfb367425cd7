package controller

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
)

var gatewayGVR = schema.GroupVersionResource{Group: backends.GatewayGroup, Version: "v1", Resource: backends.GatewayResource}

// withGateway adds the Gateway web, following home with a suffix of its own
// beside the user's IPv4 address, as the user made it.
func withGateway(t *testing.T, f *fixture) *gatewayFixture {
	t.Helper()
	return addGateway(t, f, "default", "web", "::ffff:0:0:2", "")
}

// addGateway adds the Gateway ns/name following home with suffix beside the
// user's IPv4 address, created at created (RFC 3339; "" leaves it unset).
// pass is one pass over home with the Gateway's cache and the fixture's
// caught up before and after, its writes logged.
func (g *gatewayFixture) pass() {
	g.f.t.Helper()
	g.catchUp()
	g.f.catchUp()
	g.f.t.Logf("the pass wrote %q", g.f.sync(passHome))
	g.catchUp()
	g.f.catchUp()
}

func addGateway(t *testing.T, f *fixture, ns, name, suffix, created string) *gatewayFixture {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  resourceVersion: "1"
  annotations: {dynamic-prefix.io/name: home}
spec:
  gatewayClassName: cilium
  listeners: [{name: http, port: 80, protocol: HTTP}]
  addresses: [{type: IPAddress, value: 192.0.2.8}]
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: suffix})
	if created != "" {
		at, err := time.Parse(time.RFC3339, created)
		if err != nil {
			t.Fatal(err)
		}
		u.SetCreationTimestamp(metav1.NewTime(at))
	}
	if _, err := f.dyn.Resource(gatewayGVR).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kind := backends.GatewayKind("v1")
	space := func() []netip.Prefix { return api.Space(f.dps.List()) } // as the writer's caches read them (caches.Caches.Space)
	g := &gatewayFixture{f: f, kind: kind, store: backends.NewCacheIn(kind, space), ns: ns, name: name}
	f.allowLists = append(f.allowLists, backends.Cached{Kind: g.kind, Store: g.store})
	g.catchUp()
	return g
}

type gatewayFixture struct {
	f        *fixture
	kind     *backends.Kind
	store    cache.Indexer
	ns, name string
}

// catchUp is fixture.catchUp for the Gateway: a new resourceVersion when it
// changed, and its cache shows it as the informer's transform keeps it.
func (g *gatewayFixture) catchUp() {
	g.f.t.Helper()
	g.f.catchUp()
	res := g.f.dyn.Resource(gatewayGVR).Namespace(g.ns)
	u, err := res.Get(g.f.t.Context(), g.name, metav1.GetOptions{})
	if err != nil {
		g.f.t.Fatal(err)
	}
	if rv := g.f.bump("gateways/"+g.ns+"/"+g.name, u); rv != "" {
		u.SetResourceVersion(rv)
		if u, err = res.Update(g.f.t.Context(), u, metav1.UpdateOptions{}); err != nil {
			g.f.t.Fatal(err)
		}
	}
	if err := g.store.Replace([]any{u}, ""); err != nil {
		g.f.t.Fatal(err)
	}
	g.f.dyn.ClearActions()
}

// ciliumPublishes does what Cilium's Gateway controller and LB-IPAM do once
// LB-IPAM grants addrs to the Service the controller generated for the
// Gateway (default/cilium-gateway-<name>, made here the first time): the
// Service's status.loadBalancer.ingress publishes them, and the Gateway's
// status.addresses echoes them.
func (g *gatewayFixture) ciliumPublishes(addrs ...string) {
	f := g.f
	f.t.Helper()
	ctx := f.t.Context()
	name := "cilium-gateway-" + g.name
	services := f.meta.Resource(holdings.ServiceGVR).Namespace(g.ns)
	if _, err := services.Get(ctx, name, metav1.GetOptions{}); err != nil {
		generated := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: name, ResourceVersion: "1"}}
		if _, err := services.(interface {
			CreateFake(*metav1.PartialObjectMetadata, metav1.CreateOptions, ...string) (*metav1.PartialObjectMetadata, error)
		}).CreateFake(generated, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
	if f.publishedFor == nil {
		f.publishedFor = map[string][]string{}
	}
	f.publishedFor[g.ns+"/"+name] = addrs
	u, err := f.dyn.Resource(gatewayGVR).Namespace(g.ns).Get(ctx, g.name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var list []any
	for _, a := range addrs {
		list = append(list, map[string]any{"type": "IPAddress", "value": a})
	}
	if err := unstructured.SetNestedSlice(u.Object, list, "status", "addresses"); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.dyn.Resource(gatewayGVR).Namespace(g.ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	g.catchUp()
}

// holds is what the Gateway holds in the places the writer writes.
func (g *gatewayFixture) holds() map[string]any {
	g.f.t.Helper()
	u, err := g.f.dyn.Resource(gatewayGVR).Namespace(g.ns).Get(g.f.t.Context(), g.name, metav1.GetOptions{})
	if err != nil {
		g.f.t.Fatal(err)
	}
	var addresses []string
	a, _, _ := unstructured.NestedSlice(u.Object, "spec", "addresses")
	for _, e := range a {
		addresses = append(addresses, e.(map[string]any)["value"].(string))
	}
	infra, _, _ := unstructured.NestedString(u.Object, "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
	ann := u.GetAnnotations()
	listeners, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
	return map[string]any{"addresses": addresses, "infrastructure": infra, "listeners": len(listeners),
		"target": ann[holdings.AnnotationTarget], "alpha": ann[holdings.AnnotationTargetAlpha], "record": ann[holdings.AnnotationManagedIPs]}
}

// TestAGatewayFollowsThroughARenumbering: the Gateway gets the current
// address, then the new one before the draining one, in one patch per
// renumbering beside the pool's and the Service's; the user's address and
// listeners stay; a pass with nothing changed writes nothing; deleting the
// DynamicPrefix takes out ours alone.
func TestAGatewayFollowsThroughARenumbering(t *testing.T) {
	f := newFixture(t, generous)
	g := withGateway(t, f)
	a, b := "2001:db8:a:0:ffff::2", "2001:db8:b:0:ffff::2"

	f.report(3, prefixA)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch gateways web", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("first pass wrote %q, want %q", got, want)
	}
	wantHolds := map[string]any{"addresses": []string{"192.0.2.8", a}, "infrastructure": "192.0.2.8," + a, "listeners": 1,
		"target": a, "alpha": a, "record": a}
	if diff := cmp.Diff(wantHolds, g.holds()); diff != "" {
		t.Errorf("Gateway after the first pass (-want +got):\n%s", diff)
	}
	g.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Fatalf("nothing changed, yet the pass wrote %q", got)
	}

	f.report(3, prefixB, prefixA)
	want = []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch gateways web", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("the renumbering wrote %q, want %q", got, want)
	}
	wantHolds = map[string]any{"addresses": []string{"192.0.2.8", b, a}, "infrastructure": "192.0.2.8," + b + "," + a, "listeners": 1,
		"target": b, "alpha": b, "record": b + "," + a}
	if diff := cmp.Diff(wantHolds, g.holds()); diff != "" {
		t.Errorf("Gateway after the renumbering (-want +got):\n%s", diff)
	}
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again before the caches caught up: %q", got)
	}
	g.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("again after: %q", got)
	}

	// The user (or a controller) drops our address from the
	// infrastructure annotation: the next pass puts it back, once.
	u, _ := f.dyn.Resource(gatewayGVR).Namespace("default").Get(t.Context(), "web", metav1.GetOptions{})
	_ = unstructured.SetNestedField(u.Object, "192.0.2.8", "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
	if _, err := f.dyn.Resource(gatewayGVR).Namespace("default").Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.catchUp()
	if got := f.sync(passHome); !slices.Equal(got, []string{"patch gateways web"}) {
		t.Errorf("the edited Gateway: the pass wrote %q, want one patch", got)
	}
	if diff := cmp.Diff(wantHolds, g.holds()); diff != "" {
		t.Errorf("Gateway after the repair (-want +got):\n%s", diff)
	}
	g.catchUp()

	if err := f.dyn.Resource(api.GVR).Delete(t.Context(), "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.catchUp()
	want = []string{"patch ciliumloadbalancerippools lb", "patch gateways web", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("releasing wrote %q, want %q", got, want)
	}
	wantHolds = map[string]any{"addresses": []string{"192.0.2.8"}, "infrastructure": "192.0.2.8", "listeners": 1,
		"target": "", "alpha": "", "record": ""}
	if diff := cmp.Diff(wantHolds, g.holds()); diff != "" {
		t.Errorf("Gateway after the release (-want +got):\n%s", diff)
	}
	g.catchUp()
	if got := f.sync(passHome); len(got) != 0 {
		t.Errorf("releasing again wrote %q", got)
	}
}
