package e2e

import (
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/render"
	"github.com/renumber/renumber/tools/world"
)

// TestAReplayOfTheRoutersOldRAHoldsNothingForEver (issue 42, item 3): radvd
// advertises A (preferred 20 s, valid 60 s: short, legal lifetimes) and a
// host on its link-local address records that RA. radvd renumbers to B (A
// deprecated); the host replays the recorded RA every 150 ms, so every
// solicitation hears both. Nothing moves to the replay: B is not believed
// while the two speakers disagree, the conflict is reported (the digest and
// RouterConflict), and A - still preferred when the conflict is first seen -
// stops being reported preferred once the preferred lifetime radvd stated
// runs out, and stays so once its valid lifetime has run out too (the
// kernel's SLAAC address, which the replay keeps preferred, is not the
// router's word). Before the rework the replay refreshed A for ever: after
// 30 minutes the digest still said A preferred. The host gone, B lands.
func TestAReplayOfTheRoutersOldRAHoldsNothingForEver(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	const valid, preferred = 60 * time.Second, 20 * time.Second
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: valid, Preferred: preferred}); err != nil {
		t.Fatal(err)
	}
	trusted := trustingHome(t, w, nil)
	startAgent(t, w, "node1", "--conflict-hold", "15s")
	startWriter(t, w, "writer-a")
	waitDigest(t, w, "node1", "A", has(prefixA, false, digest.SourceRA))

	sender := impostorSender(t, w, trusted)
	recorded := copyOfRadvd(t, []*ndp.PrefixInformation{pioOf(prefixA, valid, preferred)})
	stopSending := sendEvery(sender, trusted, recorded, 150*time.Millisecond)
	halt := func() {
		if stopSending != nil {
			stopSending()
			stopSending = nil
		}
	}
	defer halt()

	// radvd renumbers; the replay says A is still preferred.
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixB, Valid: valid, Preferred: preferred},
		world.Advert{Prefix: prefixA, Valid: valid, Preferred: 0}); err != nil {
		t.Fatal(err)
	}
	// B never lands while the replay goes on (checked at every sample).
	digestOf := func() (digest.Node, string) {
		v, _ := annotation(t, w, "node1")
		d, err := digest.Decode(v)
		if err != nil {
			t.Fatalf("digest %q: %v", v, err)
		}
		if _, ok := find(d, prefixB); ok {
			t.Fatalf("B believed while the replay contradicts it: %s", v)
		}
		return d, v
	}
	conflict := func(d digest.Node) bool {
		for _, l := range d.Links {
			if l.Name == "eth0" {
				return l.Conflict
			}
		}
		return false
	}
	eventually(t, "node1 reports the conflict", func() (bool, string) {
		d, v := digestOf()
		return conflict(d), v
	})
	if d, v := digestOf(); !has(prefixA, false, digest.SourceRA)(d) {
		t.Errorf("A is not preferred when the conflict is first reported: %s (want it held on the router's last word)", v)
	}
	eventually(t, "RouterConflict is True", func() (bool, string) {
		c := condition(dpStatus(t, w, "home"), render.RouterConflict)
		return c == "True RouterConflict", c
	})

	// The stall ends on the lifetimes radvd stated, not on the replay's.
	notPreferred := func(d digest.Node) bool {
		e, ok := find(d, prefixA)
		return !ok || e.Deprecated
	}
	eventuallyWithin(t, preferred+valid, "A is no longer preferred once its preferred lifetime has run out", func() (bool, string) {
		d, v := digestOf()
		return notPreferred(d) && conflict(d), v
	})
	eventuallyWithin(t, valid+valid, "A is no longer the router's once its valid lifetime has run out", func() (bool, string) {
		d, v := digestOf()
		if !notPreferred(d) {
			t.Fatalf("A preferred again after its preferred lifetime ran out: %s", v)
		}
		e, ok := find(d, prefixA)
		return !ok || e.Sources&digest.SourceRA == 0, v
	})
	// Some samples more after the RA's word on A is gone: the kernel's
	// address, kept preferred by the replay, does not bring it back.
	for range 30 {
		if d, v := digestOf(); !notPreferred(d) {
			t.Fatalf("A preferred again after its valid lifetime ran out: %s", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c := condition(dpStatus(t, w, "home"), render.RouterConflict); c != "True RouterConflict" {
		t.Errorf("RouterConflict %s while the replay goes on", c)
	}

	// The host is gone: radvd's renumbering lands.
	halt()
	waitDigest(t, w, "node1", "B", has(prefixB, false, digest.SourceRA))
}
