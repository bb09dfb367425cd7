package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/render"
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
	if _, err := exec.LookPath("named"); err != nil {
		t.Skip("BIND 9 not installed (make deps)")
	}
	for _, r := range externalDNSReads { // each range's release, its hostname key
		t.Run(r.built, func(t *testing.T) {
			bin := "external-dns-" + r.built
			if _, err := world.Bin(bin); err != nil {
				t.Skipf("%s not built (make external-dns)", bin)
			}
			digFollows(t, bin, r.prefix+"hostname")
		})
	}
}

func digFollows(t *testing.T, bin, hostnameKey string) {
	const zone, name = "example.test", "web.example.test"
	w := newWorld(t, 1)
	ctx := t.Context()
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	createService(t, w, "web", map[string]string{"dynamic-prefix.io/name": "home", render.AnnotationSuffix: "::ffff:0:1",
		hostnameKey: name})
	z, err := w.StartZone(ctx, zone,
		"www IN AAAA 2001:db8:ffff::80", "mail IN A 192.0.2.25", "@ IN MX 10 mail", `@ IN TXT "v=spf1 -all"`,
		"old IN AAAA "+on(t, prefixA, "::ffff:0:9")) // the user's, on the prefix that goes away
	if err != nil {
		t.Fatal(err)
	}
	users, err := z.Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	if _, err := w.StartExternalDNS(bin, z, "--policy=sync", "--interval=10s", "--events", "--min-event-sync-interval=1s",
		"--log-level=debug"); err != nil {
		t.Fatal(err)
	}
	a1, b1 := on(t, prefixA, "::ffff:0:1"), on(t, prefixB, "::ffff:0:1")
	digIs := func(want ...string) func() (bool, string) {
		return func() (bool, string) {
			got, err := z.Dig(ctx, name, "AAAA")
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(got, want), fmt.Sprintf("%q", got)
		}
	}
	eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+a1, digIs(a1))

	// The router renumbers: the Service's target, then BIND.
	start := time.Now()
	advertise(t, w, prefixB, prefixA)
	var toTarget, toDNS time.Duration
	dig := digIs(b1)
	eventuallyWithin(t, 90*time.Second, "dig "+name+" AAAA answers "+b1+" alone", func() (bool, string) {
		if toTarget == 0 {
			s, err := w.API.Client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err == nil && s.Annotations[render.AnnotationTarget] == b1 {
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

	after, err := z.Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range users {
		if !slices.Contains(after, rr) {
			t.Errorf("the user's record %q is gone after sync; the zone:\n%s", rr, strings.Join(after, "\n"))
		}
	}
	for _, rr := range after {
		if strings.HasPrefix(rr, name+". ") && strings.Contains(rr, a1) {
			t.Errorf("the draining address is still named: %q", rr)
		}
	}
}
