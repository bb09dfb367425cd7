package e2e

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryExampleNameAnswersOnEveryClaimedExternalDNS: every file of
// manifests/examples that publishes a name (a hostname under any
// external-dns key) is applied as it is, in a world of its own, with a real
// external-dns of each release the docs claim keeping a real BIND's zone
// (policy sync) - and BIND, not the file, is asked: the name answers what
// the example promises on prefix A, then on B alone after the router
// renumbers, and the user's records in the zone survive. An example that
// puts its hostname, or the user's target, only under keys one release does
// not read gets no record, or a wrong one, from that release: its subtest
// fails. Every name the file publishes has an answer to check.
func TestEveryExampleNameAnswersOnEveryClaimedExternalDNS(t *testing.T) {
	t.Parallel() // its subtests start worlds: among the other world tests, not before them
	named := 0
	for _, file := range exampleFiles(t) {
		name := filepath.Base(file)
		hosts := exampleHostnames(t, file)
		if len(hosts) == 0 {
			continue
		}
		named++
		ex := examples[name]
		if ex.answers == nil {
			t.Errorf("manifests/examples/%s publishes %q, but its test (examples) says nothing of what DNS answers", name, hosts)
			continue
		}
		checked := slices.Collect(maps.Keys(ex.answers(t, prefixA)))
		for _, h := range hosts {
			if !slices.ContainsFunc(checked, func(q string) bool { return strings.HasPrefix(q, h+" ") }) {
				t.Errorf("manifests/examples/%s publishes %s, which its answers (%q) do not check", name, h, checked)
			}
		}
		t.Run(name, func(t *testing.T) {
			forEachExternalDNS(t, func(t *testing.T, bin, _ string) { exampleAnswers(t, file, ex, hosts, bin) })
		})
	}
	if named == 0 {
		t.Error("no example publishes a name: the test checks nothing")
	}
}

// exampleAnswers applies file in a world of its own beside BIND and the
// external-dns bin, and asks BIND for every answer ex promises before and
// after a renumbering.
func exampleAnswers(t *testing.T, file string, ex example, hosts []string, bin string) {
	w := newWorld(t, 1)
	ctx := t.Context()
	if ex.setup != nil {
		ex.setup(t, w)
	}
	if ex.dnsSetup != nil {
		ex.dnsSetup(t, w)
	}
	advertise(t, w, prefixA)
	if err := w.API.Apply(ctx, file); err != nil {
		t.Fatalf("the API server refuses the example: %v", err)
	}
	_, zone, _ := strings.Cut(hosts[0], ".")
	for _, h := range hosts {
		if !strings.HasSuffix(h, "."+zone) {
			t.Fatalf("the example's names %q are not all in one zone %s", hosts, zone)
		}
	}
	z, _, users := startDNSReading(t, w, bin, zone, ex.sources, "www IN AAAA 2001:db8:ffff::80", "mail IN A 192.0.2.25")
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a", ex.writer...)
	for i, cur := range []netip.Prefix{prefixA, prefixB} {
		if i > 0 {
			advertise(t, w, prefixB, prefixA)
		}
		want := ex.answers(t, cur)
		for _, q := range slices.Sorted(maps.Keys(want)) {
			host, qtype, _ := strings.Cut(q, " ")
			eventuallyWithin(t, 90*time.Second, "on "+cur.String()+", dig "+q+" answers "+strings.Join(want[q], " ")+" alone",
				digIs(t, z, "", host, qtype, want[q]...))
		}
	}
	survive(t, z, users)
}

// gatewayRouteKinds are the Gateway API routes whose spec.hostnames
// external-dns's gateway-<kind> sources publish (at the targets of the
// Gateways that accepted the route).
var gatewayRouteKinds = []any{"HTTPRoute", "GRPCRoute", "TLSRoute"}

// exampleHostnames are the names the objects of file ask any claimed
// external-dns to publish (under its hostname keys, or as a route's
// hostnames), sorted.
func exampleHostnames(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(h string) {
		if h = strings.TrimSuffix(strings.TrimSpace(h), "."); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	for _, o := range objects(t, b) {
		ann, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
		for _, r := range externalDNSReads {
			v, _ := ann[r.prefix+"hostname"].(string)
			for h := range strings.SplitSeq(v, ",") {
				add(h)
			}
		}
		if slices.Contains(gatewayRouteKinds, o["kind"]) {
			spec, _ := o["spec"].(map[string]any)
			hosts, _ := spec["hostnames"].([]any)
			for _, h := range hosts {
				s, _ := h.(string)
				add(s)
			}
		}
	}
	slices.Sort(out)
	return out
}
