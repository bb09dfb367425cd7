package inspect

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/permit"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func dp(name, current string, history ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"transition": map[string]any{"mode": "ha"}},
		"status": map[string]any{"currentPrefix": current, "prefixSource": "router-advertisement", "history": history},
	}}
}

func node(name, annotation string) decide.Node {
	return decide.Node{Name: name, Digest: annotation, Reported: true}
}

// votes judges nodes with the writer's own ballot (grace one minute).
func votes(nodes ...decide.Node) []decide.Vote {
	v, _, _ := decide.New(time.Minute).Votes(nodes, now)
	return v
}

func encode(t *testing.T, ps ...digest.Prefix) string {
	t.Helper()
	s, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "eth0", Prefixes: ps}}}.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildExplainsVotesDrainingAndObjects(t *testing.T) {
	b := encode(t, digest.Prefix{Prefix: netip.MustParsePrefix("2001:db8:b::/64"), Sources: digest.SourceRA},
		digest.Prefix{Prefix: netip.MustParsePrefix("2001:db8:a::/64"), Deprecated: true, Remaining: time.Hour, Sources: digest.SourceRA})
	in := Input{
		Now: now,
		DynamicPrefixes: []*unstructured.Unstructured{dp("home", "2001:db8:b::/64",
			map[string]any{"prefix": "2001:db8:b::/64", "state": "active"},
			map[string]any{"prefix": "2001:db8:a::/64", "state": "draining", "expiresAt": "2026-11-23T13:00:00Z"})},
		Votes: votes(node("n2", b), node("n1", b), node("n3", "garbage"),
			decide.Node{Name: "n4", Digest: b, Reported: true, NotReadySince: now.Add(-time.Hour).Format(time.RFC3339)}),
		Followers: []Follower{
			{DynamicPrefix: "home", Kind: "CiliumLoadBalancerIPPool", Object: "ciliumloadbalancerippools/lb"},
			{DynamicPrefix: "home", Kind: "Service", Object: "services/default/web"},
			{DynamicPrefix: "other", Kind: "Service", Object: "services/default/x"},
		},
		Plan: map[string][]permit.Change{"home": {
			{Object: "services/default/web", Field: "metadata.annotations.lbipam.cilium.io/ips", From: "a", To: "b"},
			{Object: "ciliumbgpadvertisements/home-public", Field: "(object)", To: "{}"},
		}},
		Lease: &Lease{Holder: "writer-a"},
	}
	r := Build(in)
	if len(r.DynamicPrefixes) != 1 {
		t.Fatalf("%d DynamicPrefixes", len(r.DynamicPrefixes))
	}
	got := r.DynamicPrefixes[0]
	if want := "2 of 2 reporting node(s) prefer it (quorum 1)"; got.Why != want {
		t.Errorf("why %q, want %q", got.Why, want)
	}
	var votes []string
	for _, v := range got.Votes {
		problem, _, _ := strings.Cut(v.Problem, ":")
		votes = append(votes, v.Node+" "+strings.Join(v.Preferred, ",")+"|"+strings.Join(v.Deprecated, ",")+"|"+problem)
	}
	want := []string{
		"n1 2001:db8:b::/64|2001:db8:a::/64|",
		"n2 2001:db8:b::/64|2001:db8:a::/64|",
		"n3 ||digest cannot be read",
		"n4 2001:db8:b::/64|2001:db8:a::/64|not Ready for longer than the grace",
	}
	if !slices.Equal(votes, want) {
		t.Errorf("votes\n%q\nwant\n%q", votes, want)
	}
	if len(got.Draining) != 1 || got.Draining[0].Prefix != "2001:db8:a::/64" || !got.Draining[0].Expires.Equal(now.Add(time.Hour)) {
		t.Errorf("draining %+v", got.Draining)
	}
	var objects []string
	for _, o := range got.Objects {
		objects = append(objects, o.Object+" "+map[bool]string{true: "in sync", false: "pending"}[o.InSync])
	}
	wantObjects := []string{
		"dynamicprefixes/home in sync",
		"ciliumloadbalancerippools/lb in sync",
		"services/default/web pending",
		"ciliumbgpadvertisements/home-public pending", // to be created
	}
	if !slices.Equal(objects, wantObjects) {
		t.Errorf("objects\n%q\nwant\n%q", objects, wantObjects)
	}

	var text bytes.Buffer
	if err := r.Text(&text, now); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(text.String()), " ")
	for _, line := range []string{"DynamicPrefix home", "draining 2001:db8:a::/64 until 2026-11-23T13:00:00Z (in 1h0m0s)",
		`services/default/web would write: metadata.annotations.lbipam.cilium.io/ips: "a" -> "b"`, "Lease held by writer-a, never renewed"} {
		if !strings.Contains(flat, line) {
			t.Errorf("text lacks %q:\n%s", line, text.String())
		}
	}
}

func TestWhyNamesTheQuorumThatIsMissing(t *testing.T) {
	in := Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{dp("home", "")}}
	if got := Build(in).DynamicPrefixes[0].Why; got != "no node reports on eth0 yet" {
		t.Errorf("no nodes: %q", got)
	}
	in.Votes = votes(node("n1", encode(t, digest.Prefix{Prefix: netip.MustParsePrefix("fd00::/64"), Sources: digest.SourceRA})))
	got := Build(in).DynamicPrefixes[0]
	if got.Why != "no prefix has the quorum of 1 preferring node(s) yet" || len(got.Rejected) != 1 || got.Rejected[0].Nodes != 1 {
		t.Errorf("a rejected prefix only: %q, %+v", got.Why, got.Rejected)
	}
}

func TestTheDelegationIsShown(t *testing.T) {
	u := dp("home", "2001:db8:0:12::/64")
	if err := unstructured.SetNestedField(u.Object, "2001:db8::/56", "status", "delegatedPrefix"); err != nil {
		t.Fatal(err)
	}
	r := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{u}})
	var text bytes.Buffer
	if err := r.Text(&text, now); err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(text.String()), " "); !strings.Contains(flat, "delegation 2001:db8::/56") {
		t.Errorf("text lacks the delegation:\n%s", text.String())
	}
}

func TestTheDHCPv6ClientNodeIsShown(t *testing.T) {
	u := dp("home", "2001:db8:a00::/56")
	if err := unstructured.SetNestedField(u.Object, "n2", "status", "dhcpv6pd", "clientNode"); err != nil {
		t.Fatal(err)
	}
	r := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{u}})
	if got := r.DynamicPrefixes[0].DHCPv6Client; got != "n2" {
		t.Errorf("DHCPv6 client %q, want n2", got)
	}
	var text bytes.Buffer
	if err := r.Text(&text, now); err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(text.String()), " "); !strings.Contains(flat, "dhcpv6 client on n2") {
		t.Errorf("text lacks the client's node:\n%s", text.String())
	}
	for field, v := range map[string]string{"confirmerNode": "n3", "unconfirmed": "2001:db8:bad::/56", "since": "2026-03-01T12:00:00Z"} {
		if err := unstructured.SetNestedField(u.Object, v, "status", "dhcpv6pd", field); err != nil {
			t.Fatal(err)
		}
	}
	text.Reset()
	if err := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{u}}).Text(&text, now); err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(text.String()), " "); !strings.Contains(flat, "dhcpv6 confirmer on n3, disagreeing since 2026-03-01T12:00:00Z (client holds 2001:db8:bad::/56)") {
		t.Errorf("text lacks the confirmer's disagreement:\n%s", text.String())
	}
}

func TestProblemsAreDegradedAndOutOfSyncOnly(t *testing.T) {
	in := Object{Follower: Follower{Object: "ciliumloadbalancerippools/lb"}, InSync: true}
	out := Object{Follower: Follower{Object: "services/default/web"}}
	r := Report{DynamicPrefixes: []DynamicPrefix{
		{Name: "home", Conditions: []Condition{{Type: "Degraded", Status: "False", Reason: "Healthy"}, {Type: "PoolsSynced", Status: "True"}}, Objects: []Object{in}},
	}}
	if p := r.Problems(); len(p) != 0 {
		t.Errorf("a healthy report has problems %q", p)
	}
	r.DynamicPrefixes = append(r.DynamicPrefixes, DynamicPrefix{Name: "lab",
		Conditions: []Condition{{Type: "Degraded", Status: "True", Reason: "WriteBudgetExceeded"}}, Objects: []Object{in, out}})
	want := []string{"lab is Degraded (WriteBudgetExceeded)", "lab: services/default/web is not in sync"}
	if p := r.Problems(); !slices.Equal(p, want) {
		t.Errorf("problems %q, want %q", p, want)
	}
}

func TestAFollowedNameIsExplainedByItsServersAnswers(t *testing.T) {
	u := dp("public", "2001:db8:1::/48")
	u.Object["spec"] = map[string]any{"acquisition": map[string]any{"dns": map[string]any{
		"name": "router.example.net", "prefixLength": int64(48), "servers": []any{"192.0.2.1", "192.0.2.2"}}}}
	u.Object["status"].(map[string]any)["prefixSource"] = "dns"
	answer := func(server, p, problem string) decide.Report {
		l := digest.Link{Name: "dns"}
		if p != "" {
			l.Prefixes = []digest.Prefix{{Prefix: netip.MustParsePrefix(p)}}
		}
		return decide.Report{Node: server, Resolver: true, Problem: problem, Digest: digest.Node{Links: []digest.Link{l}}}
	}
	b := encode(t, digest.Prefix{Prefix: netip.MustParsePrefix("2001:db8:bad::/48"), Sources: digest.SourceRA})
	r := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{u},
		Votes:   votes(node("n1", b)), // a node's digest: no vote here
		Answers: map[string][]decide.Report{"public": {answer("192.0.2.1:53", "2001:db8:1::/48", ""), answer("192.0.2.2:53", "", "no answer")}}})
	got := r.DynamicPrefixes[0]
	if want := "1 of 2 servers answer router.example.net. in it (quorum 1)"; got.Why != want {
		t.Errorf("why %q, want %q", got.Why, want)
	}
	if len(got.Votes) != 2 || got.Votes[0].Node != "192.0.2.1:53" || got.Votes[1].Problem != "no answer" {
		t.Errorf("votes %+v", got.Votes)
	}
	var text bytes.Buffer
	if err := r.Text(&text, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dns name", "router.example.net.", "192.0.2.1:53", "answers 2001:db8:1::/48", "does not vote: no answer"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestAHugeDigestIsExplainedByItsRealSize: the Node cache keeps only the
// start of a digest annotation longer than a digest may be (and its size
// beside it); kubectl renumber status says how long it really is, not how
// much the cache kept.
func TestAHugeDigestIsExplainedByItsRealSize(t *testing.T) {
	kept := strings.Repeat("x", digest.MaxBytes+1) // as caches.NodeView keeps 64 KiB
	in := Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{dp("home", "2001:db8:b::/64")},
		Votes: votes(decide.Node{Name: "n1", Digest: kept, Bytes: 64 << 10, Reported: true})}
	got := Build(in).DynamicPrefixes[0].Votes
	want := "digest cannot be read: digest: invalid: 65536 bytes, at most 2048"
	if len(got) != 1 || got[0].Problem != want {
		t.Errorf("votes %+v, want one with the problem %q", got, want)
	}
}

// pdDP is a DynamicPrefix following the agents' DHCPv6 client (mode
// client, or host) on iface, on the nodes named (none: any).
func pdDP(name, mode, iface string, nodes ...string) *unstructured.Unstructured {
	pd := map[string]any{"interface": iface, "mode": mode}
	if len(nodes) > 0 {
		names := make([]any, len(nodes))
		for i, n := range nodes {
			names[i] = n
		}
		pd["nodeNames"] = names
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"acquisition": map[string]any{"dhcpv6pd": pd}},
	}}
}

// onWan is a digest reporting on wan the delegation p, held by the node's
// client (pd) or offered to it as confirmer.
func onWan(t *testing.T, p string, src digest.Source) string {
	t.Helper()
	s, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: []digest.Prefix{
		{Prefix: netip.MustParsePrefix(p), Valid: 10 * time.Minute, Sources: src}}}}}.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kubectl renumber status computes InterfaceTaken as the writer's pass does
// (controller.TakenBy: model.LinkTakenBy over the same DynamicPrefixes),
// before any status says it: lab, second by name, asking for the client
// on home's interface on a node both may run on, adopts nothing there.
// Before, the inspector judged lab alone: with the pair its status names
// reporting home's delegation, held and offered alike, it said the writer
// was about to follow it, and found no problem (exit 0).
func TestATakenInterfaceIsComputedAsTheWritersPassDoes(t *testing.T) {
	const delegated = "2001:db8:a00::/56"
	deleting := pdDP("home", "client", "wan")
	deleting.SetDeletionTimestamp(&metav1.Time{Time: now})
	for _, c := range []struct {
		name      string
		home, lab *unstructured.Unstructured
		takenBy   string
	}{
		{name: "both on wan, any node", home: pdDP("home", "client", "wan"), lab: pdDP("lab", "client", "wan"), takenBy: "home"},
		{name: "nodeNames overlap", home: pdDP("home", "client", "wan", "n1", "n2"), lab: pdDP("lab", "client", "wan", "n2", "n3"), takenBy: "home"},
		{name: "nodeNames apart", home: pdDP("home", "client", "wan", "n1", "n2"), lab: pdDP("lab", "client", "wan", "n3")},
		{name: "another interface", home: pdDP("home", "client", "wan2"), lab: pdDP("lab", "client", "wan")},
		{name: "the first in mode host", home: pdDP("home", "host", "wan"), lab: pdDP("lab", "client", "wan")},
		{name: "the first being deleted", home: deleting, lab: pdDP("lab", "client", "wan")},
	} {
		t.Run(c.name, func(t *testing.T) {
			// lab ran the client before home asked for it: its status
			// names its delegation then and the pair that now reports
			// home's.
			c.lab.Object["status"] = map[string]any{"currentPrefix": "2001:db8:f00::/56", "prefixSource": "dhcpv6-pd",
				"dhcpv6pd": map[string]any{"clientNode": "n1", "confirmerNode": "n2"}}
			r := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{c.lab, c.home},
				Votes: votes(node("n1", onWan(t, delegated, digest.SourcePD)), node("n2", onWan(t, delegated, digest.SourceOffer)))})
			home, lab := r.DynamicPrefixes[0], r.DynamicPrefixes[1]
			if home.DHCPv6TakenBy != "" || lab.DHCPv6TakenBy != c.takenBy {
				t.Fatalf("taken by: home %q, lab %q; want none, %q", home.DHCPv6TakenBy, lab.DHCPv6TakenBy, c.takenBy)
			}
			var text bytes.Buffer
			if err := r.Text(&text, now); err != nil {
				t.Fatal(err)
			}
			flat := strings.Join(strings.Fields(text.String()), " ")
			problem := "lab: its DHCPv6 interface is taken by home (InterfaceTaken)"
			if c.takenBy == "" {
				if strings.Contains(flat, "first by name") || slices.Contains(r.Problems(), problem) {
					t.Errorf("not taken, yet said so:\n%s\nproblems %q", text.String(), r.Problems())
				}
				return
			}
			if !strings.HasPrefix(lab.Why, "DynamicPrefix home (first by name) runs the agents' DHCPv6 client on wan") {
				t.Errorf("lab's why %q, want it to name home", lab.Why)
			}
			if !strings.Contains(flat, "dhcpv6 client none: home (first by name) runs it on this interface") {
				t.Errorf("the text does not say lab's interface is taken:\n%s", text.String())
			}
			if got := r.Problems(); !slices.Equal(got, []string{problem}) {
				t.Errorf("problems %q, want %q", got, problem)
			}
			// Once the writer's status says it, it is one problem, not two.
			lab.Conditions = []Condition{{Type: "Degraded", Status: "True", Reason: "InterfaceTaken"}}
			r.DynamicPrefixes[1] = lab
			if got, want := r.Problems(), []string{"lab is Degraded (InterfaceTaken)"}; !slices.Equal(got, want) {
				t.Errorf("with the writer's status: problems %q, want %q", got, want)
			}
		})
	}
}

// A two-node stall is shown from the status the writer wrote: the
// condition, the pair disagreeing and since when, and exit 3.
func TestAStalledDelegationIsShownFromTheStatus(t *testing.T) {
	u := pdDP("home", "client", "wan")
	u.Object["status"] = map[string]any{
		"currentPrefix": "2001:db8:a00::/56", "prefixSource": "dhcpv6-pd",
		"dhcpv6pd": map[string]any{"clientNode": "n1", "confirmerNode": "n2", "unconfirmed": "2001:db8:a00::/56",
			"since": "2026-11-23T11:00:00Z", "validLifetime": int64(600)},
		"conditions": []any{
			map[string]any{"type": "DelegationConfirmed", "status": "False", "reason": "DelegationDisagrees", "message": "client n1 and confirmer n2 disagree",
				"lastTransitionTime": "2026-11-23T11:00:00Z"},
			map[string]any{"type": "Degraded", "status": "True", "reason": "DelegationStalled", "message": "name the node to trust in spec.acquisition.dhcpv6pd.nodeNames",
				"lastTransitionTime": "2026-11-23T11:10:00Z"},
		},
	}
	r := Build(Input{Now: now, DynamicPrefixes: []*unstructured.Unstructured{u},
		Votes: votes(node("n1", onWan(t, "2001:db8:a00::/56", digest.SourcePD)), node("n2", onWan(t, "2001:db8:b00::/56", digest.SourceOffer)))})
	var text bytes.Buffer
	if err := r.Text(&text, now); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(text.String()), " ")
	for _, want := range []string{"dhcpv6 client on n1",
		"dhcpv6 confirmer on n2, disagreeing since 2026-11-23T11:00:00Z (client holds 2001:db8:a00::/56)",
		"Degraded=True (DelegationStalled)"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	if got, want := r.Problems(), []string{"home is Degraded (DelegationStalled)"}; !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}
