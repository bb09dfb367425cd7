package controller

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
)

// The fixture's DHCPv6-PD side: DynamicPrefixes in mode client (the agents'
// own DHCPv6 client) and the digests the client and the confirmer publish.

const (
	delegA = "2001:db8:a00::/56"
	delegB = "2001:db8:b00::/56"
	// stated is the valid lifetime the server states in its offers to the
	// confirmer (status.dhcpv6pd.validLifetime).
	stated = 10 * time.Minute
)

// pdSpec is spec.acquisition.dhcpv6pd for the agents' client on iface, on
// the nodes named (none: any).
func pdSpec(iface string, nodes ...string) map[string]any {
	pd := map[string]any{"interface": iface, "mode": "client"}
	if len(nodes) > 0 {
		names := make([]any, len(nodes))
		for i, n := range nodes {
			names[i] = n
		}
		pd["nodeNames"] = names
	}
	return pd
}

// followPD makes the DynamicPrefix name follow the agents' client with pd
// (pdSpec), creating it with one address range if it does not exist, as
// the user would, and lets the caches catch up.
func (f *fixture) followPD(name string, pd map[string]any) {
	f.t.Helper()
	ctx := f.t.Context()
	res := f.dyn.Resource(api.GVR)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		u = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
			"metadata": map[string]any{"name": name, "generation": int64(1)},
			"spec": map[string]any{
				"acquisition":   map[string]any{"dhcpv6pd": pd},
				"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
			},
		}}
		_, err = res.Create(ctx, u, metav1.CreateOptions{})
	case err == nil:
		// The whole acquisition replaced, as kubectl apply would.
		err = unstructured.SetNestedMap(u.Object, map[string]any{"dhcpv6pd": pd}, "spec", "acquisition")
		if err == nil {
			_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.catchUp()
}

// pdNode is what one node's agent reports on a link: the delegation its
// client holds, the one the server offers it as confirmer ("": none).
type pdNode struct{ link, held, offered string }

// delegations makes node-0 .. node-(len(nodes)-1) report as nodes says, each
// on its link (wan when unset); an offer states the valid lifetime stated.
func (f *fixture) delegations(nodes ...pdNode) {
	f.votes.reports = nil
	for i, n := range nodes {
		l := digest.Link{Name: cmp.Or(n.link, "wan")}
		if n.held != "" {
			l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: netip.MustParsePrefix(n.held), Sources: digest.SourcePD})
		}
		if n.offered != "" {
			l.Prefixes = append(l.Prefixes, digest.Prefix{Prefix: netip.MustParsePrefix(n.offered), Valid: stated, Sources: digest.SourceOffer})
		}
		f.votes.reports = append(f.votes.reports, decide.Report{Node: fmt.Sprintf("node-%d", i),
			Digest: digest.Node{Links: []digest.Link{l}}.Canonical()})
	}
}

// pdConverged: home follows the agents' client on wan, run by node-0 of n
// nodes and confirmed by node-1, and everything holds delegA: the first pass
// names the two, the next, with the client holding what the confirmer is
// offered, adopts it.
func pdConverged(t *testing.T, n int) *fixture {
	t.Helper()
	f := newFixture(t, generous)
	f.followPD("home", pdSpec("wan"))
	f.delegations(make([]pdNode, n)...)
	if got, want := f.sync(passHome), []string{"patch dynamicprefixes/status home"}; !slices.Equal(got, want) {
		t.Fatalf("naming the client wrote %q, want %q", got, want)
	}
	f.catchUp()
	if pd := f.status().DHCPv6PD; pd == nil || pd.ClientNode != "node-0" || pd.ConfirmerNode != "node-1" {
		t.Fatalf("dhcpv6pd %+v, want client node-0 and confirmer node-1", pd)
	}
	nodes := make([]pdNode, n)
	nodes[0].held, nodes[1].offered = delegA, delegA
	f.delegations(nodes...)
	want := []string{"patch ciliumloadbalancerippools lb", "patch dynamicprefixes/status home", "patch services web"}
	if got := f.sync(passHome); !slices.Equal(got, want) {
		t.Fatalf("adopting %s wrote %q, want %q", delegA, got, want)
	}
	f.catchUp()
	if st := f.status(); st.CurrentPrefix != delegA || st.DHCPv6PD.ValidLifetime != int64(stated/time.Second) {
		t.Fatalf("current %q, dhcpv6pd %+v; want %s, the lifetime stated", st.CurrentPrefix, st.DHCPv6PD, delegA)
	}
	f.events.reset()
	return f
}

func (r *recorder) reset() { r.reasons, r.messages, r.warnings = nil, nil, nil }

// atRest passes the writer an hour, every two minutes, the digests re-sent
// as resend makes them, and fails at the first pass that writes anything
// (what: where in the story this is).
func (f *fixture) atRest(what string, resend func()) {
	f.t.Helper()
	begin := f.clock.Now()
	for range 30 {
		f.clock.Step(2 * time.Minute)
		resend()
		if got := f.sync(passHome); len(got) != 0 {
			f.t.Fatalf("%v %s, nothing new: wrote %q", f.clock.Since(begin), what, got)
		}
	}
}
