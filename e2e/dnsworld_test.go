package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/permit"
)

// TestAMappedNameAnswersBeyondTheRouter: the Service's address is a ULA
// (from the user's LB-IPAM pool) that the world's router maps onto the ISP's
// /48 with NPTv6 (ip6tables SNPT/DNPT in its namespace). A real external-dns
// of each claimed release keeps a real BIND's zone with policy sync, from
// the Service's hostname and the user's own IPv4 target under the keys that
// release reads. BIND answers the mapped address and the user's IPv4 one;
// the client on the router's WAN side asks BIND (through the router, with
// dig) and connects to the address it answered, reaching the listener on
// the ULA. The ISP renumbers the /48: BIND answers the new mapped address
// alone, the client resolves and connects again, the old address reaches
// nothing; the ULA is never named, and the user's records survive sync.
func TestAMappedNameAnswersBeyondTheRouter(t *testing.T) {
	forEachExternalDNS(t, mappedNameFollows)
}

func mappedNameFollows(t *testing.T, bin, prefix string) {
	const zone, name, v4 = "example.test", "web.example.test", "192.0.2.10"
	w := newWorld(t, 1)
	ctx := t.Context()
	delegationA, delegationB := netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("2001:db8:2::/48")
	tr, inside, ula := mappedService(t, w, map[string]string{prefix + "hostname": name, prefix + "target": v4})
	if err := tr.Map(ctx, delegationA); err != nil {
		t.Fatal(err)
	}
	advertise(t, w, prefixA) // 2001:db8:1:100::/64, in delegationA
	createDP(t, w, "home", map[string]any{
		"acquisition": map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0", "delegatedPrefixLength": 48}},
	})
	z, _, users := startDNS(t, w, bin, zone, userRecords(t)...)
	// named answers the WAN client through the router, as the Service does.
	if err := z.RouteTo(ctx, netip.PrefixFrom(tr.ClientAddr, 128), w.Net.Router.Addr); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	// answered waits for BIND to answer target and the user's IPv4 address,
	// then the WAN client resolves the name and connects to what it got.
	answered := func(target netip.Addr) {
		t.Helper()
		eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+target.String()+" alone", digIs(t, z, "", name, "AAAA", target.String()))
		if ok, got := digIs(t, z, "", name, "A", v4)(); !ok {
			t.Errorf("the user's IPv4 target is not answered: %s", got)
		}
		got, err := z.DigFrom(ctx, tr.WAN.NS, name, "AAAA")
		if err != nil || len(got) != 1 {
			t.Fatalf("the WAN client resolving %s through BIND: %q, %v", name, got, err)
		}
		line, err := tr.Dial(ctx, netip.MustParseAddr(got[0]), 8080)
		if want := "[" + ula.String() + "]:8080 [" + tr.ClientAddr.String() + "]:"; err != nil || !strings.HasPrefix(line, want) {
			t.Errorf("the WAN client connecting to %s, as BIND answered: %q, %v; want %q...", got[0], line, err, want)
		}
	}
	targetA, _ := model.Map(model.MappingNPTv6, ula, inside, delegationA)
	answered(targetA)

	start := time.Now()
	advertise(t, w, prefixB, prefixA) // 2001:db8:2:200::/64, in delegationB
	if err := tr.Map(ctx, delegationB); err != nil {
		t.Fatal(err)
	}
	targetB, _ := model.Map(model.MappingNPTv6, ula, inside, delegationB)
	answered(targetB)
	t.Logf("%s: from the router's change to BIND's answer %v (logged, not asserted)", bin, time.Since(start).Round(time.Millisecond))
	if line, err := tr.Dial(ctx, targetA, 8080); err == nil {
		t.Errorf("the old address %s still reaches %q", targetA, line)
	}
	for _, rr := range survive(t, z, users) {
		if strings.Contains(rr, targetA.String()) || strings.Contains(rr, ula.String()) {
			t.Errorf("the zone names the old mapped address or the ULA: %q", rr)
		}
	}
}

// TestAShadowChangesNoRecord: renumber in shadow mode beside the operator
// it would replace (the writer --dry-run under the read-only shadow
// identity, no leader) over a DynamicPrefix and an HA Service whose
// hostname and target the other operator wrote, kept in a real BIND by a
// real external-dns of each claimed release with policy sync. The router
// renumbers; the shadow plans the Service's new target (it saw the
// renumbering), external-dns syncs after that, and BIND's zone is exactly
// what it was - every record, and the SOA serial, which every dynamic update
// moves. Nothing of renumber's wrote but the agent's digest (audit log).
func TestAShadowChangesNoRecord(t *testing.T) {
	forEachExternalDNS(t, shadowKeepsTheZone)
}

func shadowKeepsTheZone(t *testing.T, bin, prefix string) {
	const zone, name = "example.test", "web.example.test"
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	a1 := on(t, prefixA, "::ffff:0:1")
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		prefix + "hostname": name, prefix + "target": a1}) // as the other operator wrote them
	z, ed, _ := startDNS(t, w, bin, zone, userRecords(t)...)
	m := mark(t, w)
	startAgent(t, w, "node1")
	shadow := startShadow(t, w, "shadow-0")
	eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+a1, digIs(t, z, "", name, "AAAA", a1))
	soa, err := z.SOA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, err := z.Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}

	advertise(t, w, prefixB, prefixA)
	b1 := on(t, prefixB, "::ffff:0:1")
	eventually(t, "the shadow plans the Service's target on B", func() (bool, string) {
		cs, err := planOf(shadow)
		return slices.ContainsFunc(cs, func(c permit.Change) bool {
			return c.Object == "services/default/web" && c.Field == "metadata.annotations."+prefix+"target" && strings.Contains(c.To, b1)
		}), fmt.Sprint(cs, err)
	})
	planned := time.Now()
	eventuallyWithin(t, 60*time.Second, "external-dns syncs after the shadow's plan", func() (bool, string) {
		at, err := ed.LastSync(ctx)
		return at.After(planned), fmt.Sprint(at, err)
	})
	if got, err := z.SOA(ctx); err != nil || got != soa {
		t.Errorf("the zone's SOA moved in shadow mode: %q -> %q (%v)", soa, got, err)
	}
	after, err := z.Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("the zone changed in shadow mode:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	onlyTheAgentWrote(t, w, m)
}
