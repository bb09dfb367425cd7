package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// TestDigAnswersTheRenumberedService: what a user looks at is `dig
// web.example.test AAAA`. A real external-dns of each supported release
// (source service, provider rfc2136, policy sync, TXT registry) keeps a
// real BIND 9's zone from the HA Service "web" as renumber annotates it
// (the default target keys, both). BIND answers the Service's address on
// prefix A; the router renumbers to B, and BIND answers the address on B
// alone - the draining one on A is no longer named, though the load
// balancer keeps it. The user's own records in the zone, which external-dns
// does not own, are all still there, unchanged, after sync ran. The time
// from the router's change to the Service's target and to BIND's answer is
// logged, not asserted.
func TestDigAnswersTheRenumberedService(t *testing.T) {
	forEachExternalDNS(t, func(t *testing.T, bin, prefix string) { digFollows(t, bin, prefix+"hostname") })
}

// forEachExternalDNS runs test once for the release built for each range of
// external-dns the docs claim (externalDNSReads), with its binary's name and
// the annotation prefix it reads; without BIND or that binary, it skips.
func forEachExternalDNS(t *testing.T, test func(t *testing.T, bin, prefix string)) {
	t.Helper()
	if _, err := exec.LookPath("named"); err != nil {
		t.Skip("BIND 9 not installed (make deps)")
	}
	for _, r := range externalDNSReads {
		t.Run(r.built, func(t *testing.T) {
			bin := "external-dns-" + r.built
			if _, err := world.Bin(bin); err != nil {
				t.Skipf("%s not built (make external-dns)", bin)
			}
			test(t, bin, r.prefix)
		})
	}
}

// externalDNSFlags are how the DNS world runs external-dns: policy sync (it
// deletes what it owns and the cluster no longer asks for), reacting to
// Service events within a second, a full sync every 10 s.
var externalDNSFlags = []string{"--policy=sync", "--interval=10s", "--events", "--min-event-sync-interval=1s", "--log-level=debug"}

// startDNS starts the world's BIND for zone, holding the user's records,
// and the external-dns bin keeping it; it returns the zone, external-dns, and
// the zone's records before external-dns ran (the user's, with BIND's own).
func startDNS(t *testing.T, w *world.World, bin, zone string, records ...string) (*world.Zone, *world.ExternalDNS, []string) {
	t.Helper()
	return startDNSReading(t, w, bin, zone, nil, records...)
}

// startDNSReading is startDNS with external-dns reading the sources (such
// as gateway-httproute) besides service.
func startDNSReading(t *testing.T, w *world.World, bin, zone string, sources []string, records ...string) (*world.Zone, *world.ExternalDNS, []string) {
	t.Helper()
	z, err := w.StartZone(t.Context(), zone, records...)
	if err != nil {
		t.Fatal(err)
	}
	users, err := z.Transfer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	flags := slices.Clone(externalDNSFlags)
	for _, src := range sources {
		flags = append(flags, "--source="+src)
	}
	ed, err := w.StartExternalDNS(bin, z, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return z, ed, users
}

// digIs reports whether BIND answers name's qtype records with exactly want
// (in any order), asked as dig would from namespace ns ("" the root's).
func digIs(t *testing.T, z *world.Zone, ns, name, qtype string, want ...string) func() (bool, string) {
	want = slices.Sorted(slices.Values(want))
	return func() (bool, string) {
		got, err := z.DigFrom(t.Context(), ns, name, qtype)
		if err != nil {
			return false, err.Error()
		}
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("%s %s: %q", name, qtype, got)
	}
}

// survive checks that every record of before (the user's) is in the zone.
func survive(t *testing.T, z *world.Zone, before []string) []string {
	t.Helper()
	after, err := z.Transfer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range before {
		if !slices.Contains(after, rr) {
			t.Errorf("the user's record %q is gone after sync; the zone:\n%s", rr, strings.Join(after, "\n"))
		}
	}
	return after
}

func digFollows(t *testing.T, bin, hostnameKey string) {
	const zone, name = "example.test", "web.example.test"
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		hostnameKey: name})
	z, _, users := startDNS(t, w, bin, zone, userRecords(t)...)
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	a1, b1 := on(t, prefixA, "::ffff:0:1"), on(t, prefixB, "::ffff:0:1")
	eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+a1, digIs(t, z, "", name, "AAAA", a1))

	// The router renumbers: the Service's target, then BIND.
	start := time.Now()
	advertise(t, w, prefixB, prefixA)
	var toTarget, toDNS time.Duration
	dig := digIs(t, z, "", name, "AAAA", b1)
	eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+b1+" alone", func() (bool, string) {
		if toTarget == 0 {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err == nil && s.Annotations[holdings.AnnotationTarget] == b1 {
				toTarget = time.Since(start)
			}
		}
		ok, got := dig()
		if ok {
			toDNS = time.Since(start)
		}
		return ok, got
	})
	t.Logf("%s: from the router's change to the Service's target %v, to BIND's answer %v (external-dns --events, --min-event-sync-interval 1s, --interval 10s)",
		bin, toTarget.Round(time.Millisecond), toDNS.Round(time.Millisecond))

	for _, rr := range survive(t, z, users) {
		if strings.HasPrefix(rr, name+". ") && strings.Contains(rr, a1) {
			t.Errorf("the draining address is still named: %q", rr)
		}
	}
}

// userRecords are the user's own records in the world's zone, which
// external-dns does not own and sync must leave: an AAAA, an A, MX, TXT, and
// an AAAA on prefixA, the prefix that goes away.
func userRecords(t *testing.T) []string {
	return []string{"www IN AAAA 2001:db8:ffff::80", "mail IN A 192.0.2.25", "@ IN MX 10 mail", `@ IN TXT "v=spf1 -all"`,
		"old IN AAAA " + on(t, prefixA, "::ffff:0:9")}
}
