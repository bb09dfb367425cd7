package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// agentMetric reads one sample of the agent's metrics on node (0 if absent).
func agentMetric(t *testing.T, w *world.World, node, sample string) float64 {
	t.Helper()
	nd, err := w.Net.Node(node)
	if err != nil {
		t.Fatal(err)
	}
	body, err := nd.Get("http://[::1]:9470/metrics")
	if err != nil {
		return 0 // not serving yet
	}
	v, _ := world.MetricSample(body, sample)
	return v
}

// trustingHome creates DynamicPrefix home, following on eth0 the RAs of the
// world's router alone (trustedRouters: its link-local address), with the
// spec's other fields from extra - its key routerAdvertisement holds more
// fields of acquisition.routerAdvertisement - and returns that address.
func trustingHome(t *testing.T, w *world.World, extra map[string]any) netip.Addr {
	t.Helper()
	trusted, err := w.Net.Router.LinkLocal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ra := map[string]any{"interface": "eth0", "trustedRouters": []any{trusted.String()}}
	spec := map[string]any{"acquisition": map[string]any{"routerAdvertisement": ra}}
	for k, v := range extra {
		if more, ok := v.(map[string]any); ok && k == "routerAdvertisement" {
			maps.Copy(ra, more)
			continue
		}
		spec[k] = v
	}
	createDP(t, w, "home", spec)
	return trusted
}

// TestUntrustedAndInvalidRAsAreIgnored: with trustedRouters set, a second
// router reaching every node is ignored on every node (counted, one log line
// per agent, its SLAAC addresses not reported); from the trusted router
// itself, an RA with ICMP code 7 and a Prefix Information option for a /128
// are ignored too. Nothing is written for any of them.
func TestUntrustedAndInvalidRAsAreIgnored(t *testing.T) {
	w := newWorld(t, 2)
	ctx := t.Context()
	advertise(t, w, prefixA)
	trustingHome(t, w, nil)
	nodes := []string{"node1", "node2"}
	for _, n := range nodes {
		startAgent(t, w, n)
	}
	startWriter(t, w, "writer-a")
	for _, n := range nodes {
		waitDigest(t, w, n, "A", has(prefixA, false, digest.SourceRA))
	}
	settleWrites()
	m := mark(t, w)

	rogue, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	foreign := netip.MustParsePrefix("2001:db8:bad::/64")
	if err := rogue.Advertise(ctx, world.Advert{Prefix: foreign, Valid: 600 * time.Second, Preferred: 300 * time.Second}); err != nil {
		t.Fatal(err)
	}
	const ignored = `renumber_agent_ras_ignored_total{link="eth0",reason="untrusted"}`
	for _, n := range nodes {
		eventually(t, n+" ignores the untrusted router", func() (bool, string) {
			v := agentMetric(t, w, n, ignored)
			return v >= 2, fmt.Sprint(v)
		})
	}

	invalidBefore := map[string]float64{}
	for _, n := range nodes {
		invalidBefore[n] = agentMetric(t, w, n, `renumber_agent_ra_invalid_total{link="eth0"}`)
	}
	code7, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{&ndp.PrefixInformation{
		PrefixLength: 64, Prefix: netip.MustParseAddr("2001:db8:7::"), OnLink: true, AutonomousAddressConfiguration: true,
		ValidLifetime: time.Hour, PreferredLifetime: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	code7[1] = 7
	host, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{&ndp.PrefixInformation{
		PrefixLength: 128, Prefix: netip.MustParseAddr("2001:db8:8::1"), OnLink: true,
		ValidLifetime: time.Hour, PreferredLifetime: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{code7, host} {
		if err := w.Net.Router.SendRA(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		eventually(t, n+" counts the code-7 RA and the /128 option as invalid", func() (bool, string) {
			v := agentMetric(t, w, n, `renumber_agent_ra_invalid_total{link="eth0"}`)
			return v >= invalidBefore[n]+2, fmt.Sprint(v)
		})
	}
	settleWrites()
	for _, n := range nodes {
		v, _ := annotation(t, w, n)
		d, err := digest.Decode(v)
		if err != nil || len(d.Links) != 1 || len(d.Links[0].Prefixes) != 1 || d.Links[0].Prefixes[0].Prefix != prefixA {
			t.Errorf("%s reports %q: want A alone", n, v)
		}
		if got := countLog(w, "agent-"+n+".log", "ignoring router advertisements from"); got != 1 {
			t.Errorf("%s logged the untrusted router %d times, want once", n, got)
		}
	}
	for _, wr := range writesBy(t, w, m, writerUser) {
		if wr.Resource != "leases" {
			t.Errorf("a write for ignored RAs: %s", wr)
		}
	}
	for _, wr := range writesBy(t, w, m, "system:serviceaccount:renumber-system:renumber-agent") {
		t.Errorf("an agent wrote for ignored RAs: %s", wr)
	}
}

// TestTheSchemaRefusesBadTrustAndBounds: the API server itself refuses a
// trusted router that is not a link-local address and length bounds that
// cannot hold, and keeps the fields of a good object (a user switching from
// the existing operator loses none of them).
func TestTheSchemaRefusesBadTrustAndBounds(t *testing.T) {
	w := newWorldWith(t, 0, true)
	create := func(name string, acquisition map[string]any) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"acquisition": acquisition},
		}}
		_, err := w.API.Dynamic.Resource(api.GVR).Create(t.Context(), u, metav1.CreateOptions{})
		return err
	}
	ra := func(trusted ...any) map[string]any {
		return map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0", "trustedRouters": trusted}}
	}
	bounds := func(min, max int) map[string]any {
		return map[string]any{"routerAdvertisement": map[string]any{}, "prefixFilter": map[string]any{"minPrefixLength": min, "maxPrefixLength": max}}
	}
	for name, acq := range map[string]map[string]any{
		"global-router":  ra("2001:db8::1"),
		"not-an-address": ra("router"),
		"multicast":      ra("ff02::2"),
		"short-group":    ra("fe8::1"),
		"site-local":     ra("fec0::1"),
		"two-gaps":       ra("fe80::1::2"),
		"triple-colon":   ra("fe80:::1"),
		"trailing-colon": ra("fe80:0:0:0:0:0:1:"),
		"seven-groups":   ra("fe80:0:0:0:0:0:1"),
		"with-zone":      ra("fe80::1%eth0"),
		"min-above-max":  bounds(64, 48),
		"zero-length":    bounds(0, 64),
		"beyond-128":     bounds(48, 129),
	} {
		if err := create(name, acq); err == nil || !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	if err := create("good", map[string]any{
		"routerAdvertisement": map[string]any{"interface": "eth0", "trustedRouters": []any{"fe80::1", "fe80::abcd:1", "FEBF::1", "fe80:0:0:0:0:0:0:1", "fe80::"}},
		"prefixFilter":        map[string]any{"minPrefixLength": 48, "maxPrefixLength": 64},
	}); err != nil {
		t.Fatalf("a good DynamicPrefix refused: %v", err)
	}
	u, err := w.API.Dynamic.Resource(api.GVR).Get(t.Context(), "good", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trusted, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "acquisition", "routerAdvertisement", "trustedRouters")
	minLen, _, _ := unstructured.NestedInt64(u.Object, "spec", "acquisition", "prefixFilter", "minPrefixLength")
	if len(trusted) != 5 || minLen != 48 {
		t.Errorf("stored %v: the fields were pruned", u.Object["spec"])
	}
}

// TestTheSchemaRefusesWhatTheReplacedCRDRefused: the validations of the
// existing operator's CRD hold in ours (names as DNS labels, host-part
// suffixes in hex, non-empty interfaces, metav1.Condition's schema), so no
// object it refused is admitted by ours.
func TestTheSchemaRefusesWhatTheReplacedCRDRefused(t *testing.T) {
	w := newWorldWith(t, 0, true)
	ctx := t.Context()
	ra := map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}}
	for name, spec := range map[string]map[string]any{
		"empty-ra-interface":   {"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": ""}}},
		"empty-pd-interface":   {"acquisition": map[string]any{"dhcpv6pd": map[string]any{"interface": ""}}},
		"range-name-not-label": {"acquisition": ra, "addressRanges": []any{map[string]any{"name": "Bad_Name", "start": "::1", "end": "::2"}}},
		"range-start-not-hex":  {"acquisition": ra, "addressRanges": []any{map[string]any{"name": "lb", "start": "::zz", "end": "::2"}}},
		"range-end-too-short":  {"acquisition": ra, "addressRanges": []any{map[string]any{"name": "lb", "start": "::1", "end": ":"}}},
		"subnet-name-upper":    {"acquisition": ra, "subnets": []any{map[string]any{"name": "Svc", "prefixLength": int64(64)}}},
		"community-not-asn":    {"acquisition": ra, "subnets": []any{map[string]any{"name": "svc", "prefixLength": int64(64), "bgp": map[string]any{"community": "65001-100"}}}},
		"history-too-long":     {"acquisition": ra, "transition": map[string]any{"maxPrefixHistory": int64(11)}},
		// renumber's own: a DNS name is followed alone, with a length, asked at most 5 servers
		"dns-beside-ra": {"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"},
			"dns": map[string]any{"name": "router.example.net", "prefixLength": int64(48)}}},
		"dns-no-length":      {"acquisition": map[string]any{"dns": map[string]any{"name": "router.example.net"}}},
		"dns-length-65":      {"acquisition": map[string]any{"dns": map[string]any{"name": "router.example.net", "prefixLength": int64(65)}}},
		"dns-interval-words": {"acquisition": map[string]any{"dns": map[string]any{"name": "router.example.net", "prefixLength": int64(48), "minInterval": "often"}}},
		"dns-six-servers": {"acquisition": map[string]any{"dns": map[string]any{"name": "router.example.net", "prefixLength": int64(48),
			"servers": []any{"::1", "::2", "::3", "::4", "::5", "::6"}}}},
	} {
		if err := createDPErr(t, w, name, spec); err == nil || !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	if err := createDPErr(t, w, "good", map[string]any{"acquisition": ra,
		"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
		"subnets":       []any{map[string]any{"name": "svc", "offset": int64(1), "prefixLength": int64(112), "bgp": map[string]any{"advertise": true, "community": "65001:100"}}},
	}); err != nil {
		t.Fatalf("a good DynamicPrefix refused: %v", err)
	}
	if err := createDPErr(t, w, "good-dns", map[string]any{"acquisition": map[string]any{"dns": map[string]any{
		"name": "router.example.net", "prefixLength": int64(48), "servers": []any{"192.0.2.53", "[2001:db8::53]:5353"}, "maxInterval": "1h30m"}}}); err != nil {
		t.Fatalf("a good DynamicPrefix following a name refused: %v", err)
	}
	for name, cond := range map[string]string{
		"no reason":        `{"type":"Ready","status":"True","lastTransitionTime":"2026-11-24T00:00:00Z","message":""}`,
		"reason not camel": `{"type":"Ready","status":"True","reason":"not ok","lastTransitionTime":"2026-11-24T00:00:00Z","message":""}`,
		"type with spaces": `{"type":"not ready","status":"True","reason":"Ok","lastTransitionTime":"2026-11-24T00:00:00Z","message":""}`,
		"no time":          `{"type":"Ready","status":"True","reason":"Ok","message":""}`,
	} {
		_, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "good", types.MergePatchType,
			[]byte(`{"status":{"conditions":[`+cond+`]}}`), metav1.PatchOptions{}, "status")
		if !apierrors.IsInvalid(err) {
			t.Errorf("a condition with %s: %v, want Invalid", name, err)
		}
	}
}
