package backends

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

func gateway(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n"+doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// homeGateway follows home with suffix ::ffff:0:0:1, beside the user's IPv4
// address, a hostname and an infrastructure annotation of its own.
const homeGateway = `
metadata:
  name: web
  namespace: default
  annotations:
    dynamic-prefix.io/name: home
    dynamic-prefix.io/suffix: "::ffff:0:0:1"
    external-dns.kubernetes.io/target: 192.0.2.7
spec:
  gatewayClassName: cilium
  listeners: [{name: http, port: 80, protocol: HTTP}]
  addresses:
    - {type: IPAddress, value: 192.0.2.7}
    - {type: Hostname, value: web.example.org}
  infrastructure:
    annotations: {example.org/team: web}
`

// TestAGatewayFollowsLikeAnHAService: its entries are one address per pooled
// prefix, the suffix on each, read from the keys an HA Service takes.
func TestAGatewayFollowsLikeAnHAService(t *testing.T) {
	k := GatewayKind("v1")
	po, ours, err := k.Decode(gateway(t, homeGateway))
	if err != nil || !ours {
		t.Fatalf("decode: ours %v, %v", ours, err)
	}
	if want := (holdings.PoolFollow{DynamicPrefix: "home", Suffix: "::ffff:0:0:1"}); po.Follow != want {
		t.Errorf("follow %+v, want %+v", po.Follow, want)
	}
	if want := []string{"192.0.2.7"}; !slices.Equal(po.Entries, want) {
		t.Errorf("entries %q, want the IPAddress entries %q", po.Entries, want)
	}
	m := model.Model{Name: "home"}
	pooled := []netip.Prefix{netip.MustParsePrefix("2001:db8:b::/64"), netip.MustParsePrefix("2001:db8:a::/64")}
	got, err := render.PoolEntries(m, po.Follow, pooled, po.Form)
	if want := []string{"2001:db8:b:0:ffff::1", "2001:db8:a:0:ffff::1"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("desired %q, %v; want %q", got, err, want)
	}
	if !k.ClaimExact {
		t.Error("without a record, a user's address would be claimed by its shape")
	}
}

// TestAGatewayWriteKeepsTheUsersEntries: our addresses go after the user's in
// spec.addresses and the infrastructure annotation (which holds the user's
// IPv4 too, or Cilium's LB-IPAM would lose it); the DNS target gets the
// current address beside the user's; the owned entries of before go.
func TestAGatewayWriteKeepsTheUsersEntries(t *testing.T) {
	k := GatewayKind("v1")
	u := gateway(t, homeGateway)
	owned := []string{"2001:db8:a:0:ffff::1"}
	record := []string{"2001:db8:b:0:ffff::1", "2001:db8:a:0:ffff::1"}
	_ = unstructured.SetNestedSlice(u.Object, append(u.Object["spec"].(map[string]any)["addresses"].([]any),
		map[string]any{"type": "IPAddress", "value": "2001:db8:a:0:ffff::1"}), "spec", "addresses")
	spec, err := k.Place(u, owned, record, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `addresses:
- type: IPAddress
  value: 192.0.2.7
- type: Hostname
  value: web.example.org
- type: IPAddress
  value: 2001:db8:b:0:ffff::1
- type: IPAddress
  value: 2001:db8:a:0:ffff::1
infrastructure:
  annotations:
    lbipam.cilium.io/ips: 192.0.2.7,2001:db8:b:0:ffff::1,2001:db8:a:0:ffff::1
`
	if diff := cmp.Diff(want, rendered(t, spec)); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	targets := k.Annotate(u, owned, record, false)
	wantTargets := map[string]any{holdings.AnnotationTarget: "192.0.2.7,2001:db8:b:0:ffff::1", holdings.AnnotationTargetAlpha: "2001:db8:b:0:ffff::1"}
	if diff := cmp.Diff(wantTargets, targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}

	// Released: ours go everywhere, the user's stay; an emptied annotation
	// is removed.
	spec, _ = k.Place(u, owned, nil, true)
	want = `addresses:
- type: IPAddress
  value: 192.0.2.7
- type: Hostname
  value: web.example.org
infrastructure:
  annotations:
    lbipam.cilium.io/ips: 192.0.2.7
`
	if diff := cmp.Diff(want, rendered(t, spec)); diff != "" {
		t.Errorf("released spec (-want +got):\n%s", diff)
	}
	wantTargets = map[string]any{holdings.AnnotationTarget: "192.0.2.7"}
	if diff := cmp.Diff(wantTargets, k.Annotate(u, owned, nil, true)); diff != "" {
		t.Errorf("released targets (-want +got):\n%s", diff)
	}
}

// written is homeGateway as a write of record leaves it.
func written(t *testing.T, record []string) *unstructured.Unstructured {
	t.Helper()
	k := GatewayKind("v1")
	u := gateway(t, homeGateway)
	spec, err := k.Place(u, nil, record, false)
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, spec["addresses"], "spec", "addresses")
	_ = unstructured.SetNestedField(u.Object, spec["infrastructure"].(map[string]any)["annotations"].(map[string]any)[holdings.AnnotationIPs],
		"spec", "infrastructure", "annotations", holdings.AnnotationIPs)
	ann := u.GetAnnotations()
	for key, v := range k.Annotate(u, nil, record, false) {
		ann[key] = v.(string)
	}
	ann[holdings.AnnotationManagedIPs] = holdings.WriteRecord(record, holdings.Listed)
	u.SetAnnotations(ann)
	return u
}

// TestAGatewayHoldsItsAddressesOnlyWhereEveryPlaceHoldsThem: written, it reads
// as holding the record (no write at rest); with our address taken out of the
// infrastructure annotation or the target, or an address of the user's not
// mirrored in the infrastructure annotation, the record's entries read as
// missing, so the next pass writes them back.
func TestAGatewayHoldsItsAddressesOnlyWhereEveryPlaceHoldsThem(t *testing.T) {
	record := []string{"2001:db8:b:0:ffff::1", "2001:db8:a:0:ffff::1"}
	full := []string{"192.0.2.7", "2001:db8:b:0:ffff::1", "2001:db8:a:0:ffff::1"}
	for _, c := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		want []string
	}{
		{"as written", func(*unstructured.Unstructured) {}, full},
		{"infrastructure annotation removed", func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
		}, []string{"192.0.2.7"}},
		{"a user's address added, not mirrored", func(u *unstructured.Unstructured) {
			a, _, _ := unstructured.NestedSlice(u.Object, "spec", "addresses")
			_ = unstructured.SetNestedSlice(u.Object, append(a, map[string]any{"value": "192.0.2.8"}), "spec", "addresses")
		}, []string{"192.0.2.7", "192.0.2.8"}},
		{"target moved to the draining address", func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			ann[holdings.AnnotationTargetAlpha] = "2001:db8:a:0:ffff::1"
			u.SetAnnotations(ann)
		}, []string{"192.0.2.7"}},
		{"target still there with skip-external-dns-update", func(u *unstructured.Unstructured) {
			ann := u.GetAnnotations()
			ann[holdings.AnnotationSkipDNS] = "true"
			u.SetAnnotations(ann)
		}, []string{"192.0.2.7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := written(t, record)
			c.edit(u)
			got, err := GatewayKind("v1").Entries(u, "")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTheGatewayCacheKeepsWhatTheWriterReads: the slim copy decodes as the
// whole object does (follow keys, targets, addresses, the infrastructure
// annotation) and keeps no listener.
func TestTheGatewayCacheKeepsWhatTheWriterReads(t *testing.T) {
	k := GatewayKind("v1")
	u := written(t, []string{"2001:db8:b:0:ffff::1"})
	slim, err := k.Slim(u)
	if err != nil {
		t.Fatal(err)
	}
	s := slim.(*unstructured.Unstructured)
	whole, _, err1 := k.Decode(u)
	kept, _, err2 := k.Decode(s)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	whole.Kind, kept.Kind = nil, nil
	if diff := cmp.Diff(whole, kept); diff != "" {
		t.Errorf("slim decodes differently (-whole +slim):\n%s", diff)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(s.Object, "spec", "listeners"); found {
		t.Error("the cache keeps the listeners")
	}
	if got := k.Scope(); got != (Scope{}) {
		t.Errorf("scope %+v", got)
	}
}

// The cache keeps the IPAddress values of a Gateway's status.addresses,
// which its Gateway controller writes and its owner cannot: the claims read
// who holds an address from them (render.HeldByStatus). Hostnames and
// named addresses there are not kept, nor more than
// holdings.MaxKeptPublished whole: past them only the /64s of IPv6 ones.
func TestTheGatewayCacheKeepsTheAddressesItsControllerPublishes(t *testing.T) {
	k := GatewayKind("v1")
	for _, tc := range []struct {
		name   string
		status []any
		want   []string
	}{
		{"none published", nil, nil},
		{"addresses and a hostname", []any{
			map[string]any{"type": "IPAddress", "value": "192.0.2.8"},
			map[string]any{"type": "Hostname", "value": "gw.example"},
			map[string]any{"value": "2001:db8:b:0:ffff::1"},
		}, []string{"192.0.2.8", "2001:db8:b:0:ffff::1"}},
		{"more than the cache keeps", append(slices.Repeat([]any{map[string]any{"type": "IPAddress", "value": "192.0.2.9"}}, holdings.MaxKeptPublished+10),
			map[string]any{"type": "IPAddress", "value": "2001:db8:b:0:ffff::1"}),
			append(slices.Repeat([]string{"192.0.2.9"}, holdings.MaxKeptPublished), "2001:db8:b:0:ffff::/112")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := written(t, []string{"2001:db8:b:0:ffff::1"})
			if tc.status != nil {
				if err := unstructured.SetNestedSlice(u.Object, tc.status, "status", "addresses"); err != nil {
					t.Fatal(err)
				}
			}
			slim, err := k.Slim(u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, k.PublishedOf(slim.(*unstructured.Unstructured))); diff != "" {
				t.Errorf("published, as cached (-want +got):\n%s", diff)
			}
		})
	}
}

type gatewayAPI struct{ served bool }

func (g gatewayAPI) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != "gateway.networking.k8s.io/v1" || !g.served {
		return &metav1.APIResourceList{}, nil
	}
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "gateways"}, {Name: "httproutes"}}}, nil
}

func TestGatewaysFollowWhereTheAPIServerServesThem(t *testing.T) {
	for _, served := range []bool{false, true} {
		kinds, err := GatewayKinds(gatewayAPI{served})
		if err != nil || len(kinds) != map[bool]int{false: 0, true: 1}[served] {
			t.Errorf("served %v: kinds %v, %v", served, kinds, err)
		}
	}
}

// TestAGatewayOwnsAnEntryOnlyAsItsRecordSpellsIt: renumber-writer-gateways
// compares a Gateway's record with its three places as text (s30-gwrecords),
// so the writer owns an entry only as its record spells it, as for every
// other kind (red team r8 F1). A stolen token's respelled copy of the
// user's 2001:db8:b::5, added to spec.addresses and the infrastructure
// annotation and recorded, is all the writer takes out: the user's stays,
// as the user spelled it (read by value, the write took both out, and the
// policy refused it - every later write to that Gateway too). And a record
// that spells the writer's address otherwise than spec.addresses owns
// nothing there: the entry is the user's, kept; the record drops the
// spelling nothing holds.
func TestAGatewayOwnsAnEntryOnlyAsItsRecordSpellsIt(t *testing.T) {
	k := GatewayKind("v1")
	const ours, user, token = "2001:db8:b:0:ffff::1", "2001:db8:b::5", "2001:DB8:B::5"
	at := func(addresses []string, record, infra string) *unstructured.Unstructured {
		u := gateway(t, homeGateway)
		list := u.Object["spec"].(map[string]any)["addresses"].([]any)
		for _, a := range addresses {
			list = append(list, map[string]any{"type": "IPAddress", "value": a})
		}
		_ = unstructured.SetNestedSlice(u.Object, list, "spec", "addresses")
		_ = unstructured.SetNestedField(u.Object, infra, "spec", "infrastructure", "annotations", holdings.AnnotationIPs)
		ann := u.GetAnnotations()
		ann[holdings.AnnotationManagedIPs] = record
		ann[holdings.AnnotationTarget] = "192.0.2.7," + ours
		ann[holdings.AnnotationTargetAlpha] = ours
		u.SetAnnotations(ann)
		return u
	}
	write := func(u *unstructured.Unstructured) holdings.Write {
		t.Helper()
		po, _, err := k.Decode(u)
		if err != nil {
			t.Fatal(err)
		}
		w, err := render.Pool(model.Model{Name: "home"}, po.Held, []netip.Prefix{netip.MustParsePrefix("2001:db8:b::/64")}, nil, k.ClaimExact)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	u := at([]string{user, ours, token}, ours+","+token, "192.0.2.7,"+user+","+ours+","+token)
	w := write(u)
	spec, err := k.Place(u, w.Owned, w.Record, false)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, a := range spec["addresses"].([]any) {
		values = append(values, a.(map[string]any)["value"].(string))
	}
	infra := spec["infrastructure"].(map[string]any)["annotations"].(map[string]any)[holdings.AnnotationIPs]
	if want := []string{"192.0.2.7", "web.example.org", user, ours}; !slices.Equal(values, want) || infra != "192.0.2.7,"+user+","+ours ||
		!slices.Equal(w.Record, []string{ours}) {
		t.Errorf("the token's %s recorded beside the user's %s: the write records %q, places spec.addresses %q and infrastructure %v; want %q, %q and the user's kept",
			token, user, w.Record, values, infra, ours, want)
	}

	u = at([]string{ours}, "2001:DB8:B:0:FFFF::1", "192.0.2.7,"+ours)
	w = write(u)
	if !w.Kept || len(w.Record) != 0 || slices.Contains(w.Owned, ours) {
		t.Errorf("a record spelling the address otherwise than spec.addresses: write %+v; want %s kept as the user's, nothing recorded", w, ours)
	}
}
