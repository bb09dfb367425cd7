package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/mdlayher/ndp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/world"
)

// The RA flood: a host on the link sends Router Advertisements, each with a
// fresh /64 of infinite lifetime, from 60 fresh link-local sources in turn,
// as fast as one socket goes (THC-IPv6's flood_router26 does this), while
// the real router keeps advertising. Before the caps, 18,240 prefixes in a
// minute grew one agent from 12.1 to 17.0 MiB, without bound. The agent's
// RSS is sampled every few seconds; it must stay flat, and its digest valid
// and on the real router's prefix.

type flood struct {
	At      string  `json:"measuredAt"`
	Seconds float64 `json:"seconds"`
	RAs     int     `json:"ras"`
	Sources int     `json:"sources"`
	// RSSMiB are the agent's samples, the first before the flood.
	RSSMiB    []float64 `json:"agentRSSMiB"`
	AnonMiB   []float64 `json:"agentAnonMiB"`
	Digest    string    `json:"digestAfter"`
	Valid     bool      `json:"digestValid"`
	KeptRoute bool      `json:"realPrefixKept"`
}

const floodSources = 60

func runFlood(ctx context.Context, lasting time.Duration) (*flood, error) {
	agentBin, _, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("flood: 1 node, a router on %s, a flooder with %d sources for %s", fresh(0), floodSources, lasting)
	w, err := startInstalledWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return nil, err
	}
	agent, err := w.StartAgent(ctx, agentBin, "node1")
	if err != nil {
		return nil, err
	}
	annotation := func() string { return nodeDigest(ctx, w, "node1") }
	if err := reported(ctx, w, "node1", fresh(0)); err != nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	flooder, err := w.Net.RogueRouter(ctx, "")
	if err != nil {
		return nil, err
	}
	var sources []netip.Addr
	for i := range floodSources {
		a := netip.AddrFrom16([16]byte{0xfe, 0x80, 8: 0x02, 9: 0x66, 14: 0xf0, 15: byte(i)})
		if err := flooder.AddLinkLocal(ctx, a); err != nil {
			return nil, err
		}
		sources = append(sources, a)
	}
	sender, err := flooder.Sender()
	if err != nil {
		return nil, err
	}
	defer sender.Close()

	f := &flood{At: time.Now().UTC().Format(time.RFC3339), Sources: floodSources}
	sample := func() {
		m := memory(agent.Process.Pid)
		f.RSSMiB, f.AnonMiB = append(f.RSSMiB, m.rss), append(f.AnonMiB, m.anon)
	}
	sample()
	start := time.Now()
	next := start.Add(5 * time.Second)
	for i := 0; time.Since(start) < lasting; i++ {
		p := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x80 | byte(i>>24), byte(i >> 16), byte(i >> 8), byte(i)})
		b, err := ndp.MarshalMessage(&ndp.RouterAdvertisement{Options: []ndp.Option{&ndp.PrefixInformation{
			PrefixLength: 64, Prefix: p, OnLink: true, AutonomousAddressConfiguration: true,
			ValidLifetime: ndp.Infinity, PreferredLifetime: ndp.Infinity}}})
		if err != nil {
			return nil, err
		}
		if err := sender.Send(sources[i%len(sources)], b); err == nil {
			f.RAs++
		}
		if time.Now().After(next) {
			sample()
			progress("flood: %d RAs, agent RSS %.1f MiB", f.RAs, f.RSSMiB[len(f.RSSMiB)-1])
			next = next.Add(5 * time.Second)
		}
		time.Sleep(2 * time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	f.Seconds = time.Since(start).Seconds()
	time.Sleep(3 * time.Second)
	sample()
	f.Digest = annotation()
	n, err := digest.Decode(f.Digest)
	f.Valid = err == nil
	for _, l := range n.Links {
		for _, p := range l.Prefixes {
			f.KeptRoute = f.KeptRoute || (p.Prefix == fresh(0) && !p.Deprecated)
		}
	}
	return f, nil
}

func writeFlood(b *strings.Builder, f *flood) {
	fmt.Fprintf(b, "\n## RA flood (measured %s)\n\n", f.At)
	fmt.Fprintf(b, "%d RAs in %.0f s, each a fresh /64 with infinite lifetimes, from %d fresh link-local sources in turn, while the router advertises every 3-4 s. The agent's RSS every 5 s (the first before the flood; goal: flat within a few MiB however long it lasts):\n\n", f.RAs, f.Seconds, f.Sources)
	b.WriteString("| sample | RSS MiB | anonymous MiB |\n|---|---|---|\n")
	for i := range f.RSSMiB {
		fmt.Fprintf(b, "| %d | %.1f | %.1f |\n", i, f.RSSMiB[i], f.AnonMiB[i])
	}
	fmt.Fprintf(b, "\nDigest after the flood: `%s` (valid: %v; the router's prefix kept preferred: %v).\n", f.Digest, f.Valid, f.KeptRoute)
}

// nodeDigest is the digest annotation on node ("" when it cannot be read).
func nodeDigest(ctx context.Context, w *world.World, node string) string {
	n, err := w.API.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return n.Annotations[digest.Annotation]
}

// reported waits up to a minute for the agent on node to report p.
func reported(ctx context.Context, w *world.World, node string, p netip.Prefix) error {
	for deadline := time.Now().Add(time.Minute); !strings.Contains(nodeDigest(ctx, w, node), p.String()); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent on %s never reported %s", node, p)
		}
	}
	return nil
}
