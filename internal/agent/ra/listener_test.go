package ra

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
	"k8s.io/utils/clock"

	"github.com/renumber/renumber/internal/agent/observe"

	"github.com/renumber/renumber/internal/agent/vethtest"
)

// speaker opens the speaking end on tx (retrying while the link-local
// address is not there yet).
func speaker(t *testing.T, v *vethtest.Pair) *ndp.Conn {
	t.Helper()
	var c *ndp.Conn
	v.Do(t, func() error {
		ifi, err := net.InterfaceByName("tx")
		if err != nil {
			return err
		}
		for range 100 {
			if c, _, err = ndp.Listen(ifi, ndp.LinkLocal); err == nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond) // the kernel adds the address
		}
		return err
	})
	t.Cleanup(func() { c.Close() })
	return c
}

var allNodes = netip.MustParseAddr("ff02::1")

// heard is one RA the listener handed over, and when it was handed.
type heard struct {
	at, handed time.Time
	prefix     netip.Prefix
	multicast  bool
}

type report struct {
	kind string // "read", "lost", "solicited" or "reopened"
	at   time.Time
}

// startListener runs a listener on rx; each RA blocks in Heard until the
// test takes it from the channel (an agent slow to read).
func startListener(t *testing.T, v *vethtest.Pair) (*Listener, chan heard, chan report) {
	t.Helper()
	ras := make(chan heard)
	reports := make(chan report, 16)
	ctx, cancel := context.WithCancel(context.Background())
	// Nothing blocks once the test is over.
	send := func(r report) {
		select {
		case reports <- r:
		case <-ctx.Done():
		}
	}
	l := NewListener("rx", Reports{
		Heard: func(_ string, _ netip.Addr, at time.Time, p []observe.RAPrefix, multicast bool) {
			h := heard{at: at, multicast: multicast}
			if len(p) > 0 {
				h.prefix = p[0].Prefix
			}
			select {
			case ras <- h:
			case <-ctx.Done():
			}
		},
		Solicited: func(_ string, at time.Time) { send(report{"solicited", at}) },
		Read:      func(_ string, at time.Time) { send(report{"read", at}) },
		Lost:      func(_ string, at time.Time) { send(report{"lost", at}) },
		Reopened:  func(_ string, at time.Time) { send(report{"reopened", at}) },
	}, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	v.Go(t, func() { l.Run(ctx); close(done) })
	t.Cleanup(func() { cancel(); <-done })
	return l, ras, reports
}

func ra(i int) *ndp.RouterAdvertisement {
	return &ndp.RouterAdvertisement{RouterLifetime: time.Minute,
		Options: []ndp.Option{pio(fmt.Sprintf("2001:db8:%x::/64", i), time.Hour, time.Hour)}}
}

func prefixOf(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/64", i)) }

// An RA read late is stamped when it arrived; a Sync is answered once
// everything that arrived was handed over, at a time after the Sync; an RA
// off the link (hop limit below 255) is not handed over, and one sent to
// the node alone is told apart from one sent to all nodes.
func TestListenerStampsArrivalAndReportsWhenCaughtUp(t *testing.T) {
	v := vethtest.New(t, "rxtime")
	tx := speaker(t, v)
	l, ras, reports := startListener(t, v)
	clk := clock.RealClock{}

	// The first RA: sent until the listener is up (it opens asynchronously).
	for i := 0; ; i++ {
		if err := tx.WriteTo(ra(0), nil, allNodes); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ras:
		case <-time.After(50 * time.Millisecond):
			if i > 200 {
				t.Fatal("the listener never handed over an RA")
			}
			continue
		}
		break
	}
	for drained := false; !drained; { // the copies sent before it was up
		select {
		case <-ras:
		case <-time.After(100 * time.Millisecond):
			drained = true
		}
	}
	solicitedAfterRead(t, reports)

	// The agent is slow: RAs 1..5 arrive while it handles none.
	sentBefore := make([]time.Time, 6)
	for i := 1; i <= 5; i++ {
		sentBefore[i] = clk.Now()
		if err := tx.WriteTo(ra(i), nil, allNodes); err != nil {
			t.Fatal(err)
		}
	}
	// Off the link: hop limit 64.
	if err := tx.WriteTo(ra(6), &ipv6.ControlMessage{HopLimit: 64}, allNodes); err != nil {
		t.Fatal(err)
	}
	// To this node alone (its link-local address).
	rxaddr := interfaceAddr(t, v, "rx")
	if err := tx.WriteTo(ra(7), nil, rxaddr); err != nil {
		t.Fatal(err)
	}
	synced := clk.Now()
	l.Sync()
	released := clk.Now()
	var got []heard
	for range 6 {
		h := <-ras
		h.handed = clk.Now()
		got = append(got, h)
	}
	for i, h := range got[:5] {
		if h.prefix != prefixOf(i+1) || !h.multicast {
			t.Fatalf("RA %d: got %v multicast=%v, want %v to all nodes", i+1, h.prefix, h.multicast, prefixOf(i+1))
		}
		// Stamped when it arrived: after it was sent (within the two
		// clock readings of the conversion, which err early), before the
		// agent was even ready to take it.
		if h.at.Before(sentBefore[i+1].Add(-time.Millisecond)) || !h.at.Before(released) {
			t.Errorf("RA %d stamped %s, sent after %s, handed over only after %s",
				i+1, h.at.Format(time.StampNano), sentBefore[i+1].Format(time.StampNano), released.Format(time.StampNano))
		}
		if i > 0 && h.at.Before(got[i-1].at) {
			t.Errorf("RA %d stamped before RA %d", i+1, i)
		}
	}
	if last := got[5]; last.prefix != prefixOf(7) || last.multicast {
		t.Errorf("the last RA handed over: %v multicast=%v, want %v to this node alone (the one off the link dropped)", last.prefix, last.multicast, prefixOf(7))
	}
	r := <-reports
	if r.kind != "read" || r.at.Before(synced) {
		t.Fatalf("report %s at %s, want read at or after the Sync (%s)", r.kind, r.at.Format(time.StampNano), synced.Format(time.StampNano))
	}
	select {
	case h := <-ras:
		t.Fatalf("an RA handed over after the Read report: %v", h.prefix)
	default:
	}

	// Idle, a Sync interrupts the blocked read and is answered.
	for range 3 {
		before := clk.Now()
		l.Sync()
		if r := <-reports; r.kind != "read" || r.at.Before(before) {
			t.Fatalf("report %s at %s, want read after %s", r.kind, r.at.Format(time.StampNano), before.Format(time.StampNano))
		}
	}
}

// A flood that overflows the socket's queue while the agent reads nothing is
// reported as lost before anything read after the gap, and before the link
// is reported read.
func TestListenerReportsTheKernelsDrops(t *testing.T) {
	v := vethtest.New(t, "rxtime")
	tx := speaker(t, v)
	l, ras, reports := startListener(t, v)
	solicitedAfterRead(t, reports)
	// One RA in the handler, blocked; then far more than the queue holds.
	firstHandedOver(t, tx, ras)
	const flood = 5000
	for i := range flood {
		_ = tx.WriteTo(ra(i%4096+1), nil, allNodes)
	}
	synced := time.Now()
	l.Sync()
	handed, lost := 0, false
	for {
		select {
		case <-ras:
			handed++
			continue
		case r := <-reports:
			if r.kind == "lost" {
				lost = true
			}
			if r.kind != "read" || r.at.Before(synced) {
				continue
			}
		}
		break
	}
	if !lost || handed >= flood {
		t.Fatalf("handed over %d of %d RAs, lost reported: %v; want fewer handed and the loss reported", handed, flood, lost)
	}
}

// A socket reopened (a restart asked, as when the link comes up) reports the
// gap since the last one closed - nothing queued what arrived in it, and a
// router's contradiction may have been there - and then its own
// solicitation, not one the last socket sent (its answer may have come in
// the gap). The first socket reports no gap: there was no socket before.
func TestAReopenedSocketReportsTheGap(t *testing.T) {
	v := vethtest.New(t, "rxtime")
	l, _, reports := startListener(t, v)
	var got []string
	for r := range reports {
		got = append(got, r.kind)
		if r.kind == "solicited" {
			break
		}
	}
	if slices.Contains(got, "reopened") {
		t.Fatalf("the first socket reported %v", got)
	}
	restarted := time.Now()
	l.Restart()
	never := time.After(time.Minute) // the listener reopens at once
	var reopened time.Time
	for {
		select {
		case r := <-reports:
			switch {
			case r.kind == "reopened" && r.at.Before(restarted):
				t.Fatalf("reopened at %s, before the restart at %s", r.at.Format(time.StampNano), restarted.Format(time.StampNano))
			case r.kind == "reopened":
				reopened = r.at
			case r.kind == "solicited" && r.at.Before(reopened):
				t.Fatalf("solicited at %s reported after the reopen at %s", r.at.Format(time.StampNano), reopened.Format(time.StampNano))
			case r.kind == "solicited" && !reopened.IsZero():
				return
			}
		case <-never:
			t.Fatalf("no reopen and solicitation reported after the restart (reopened at %s)", reopened.Format(time.StampNano))
		}
	}
}

// A link re-created under its name (a new index) is listened on at the first
// attempt after the restart: the socket's zone was the link's name, whose
// index Go caches for up to a minute, and every attempt failed with ENODEV
// until the cache ran out (the agent deaf for 60-70 s in the world).
func TestARecreatedLinkIsListenedOnAtOnce(t *testing.T) {
	v := vethtest.New(t, "rxtime")
	l, _, reports := startListener(t, v)
	solicitedAfterRead(t, reports)
	v.Recreate(t)
	failures := metricErrors.With("rx").Value()
	l.Restart()
	never := time.After(time.Minute)
	for {
		select {
		case r := <-reports:
			if r.kind != "reopened" {
				continue
			}
			// The old socket's read may fail as its link goes, counted as
			// one failure (after failures was read, under load); every
			// attempt to open on the re-created link failed before.
			if n := metricErrors.With("rx").Value() - failures; n > 1 {
				t.Errorf("%d attempts failed before the listener opened on the re-created link", n)
			}
			return
		case <-never:
			t.Fatalf("never reopened; %d attempts failed", metricErrors.With("rx").Value()-failures)
		}
	}
}

// interfaceAddr is the link-local address of the interface name.
func interfaceAddr(t *testing.T, v *vethtest.Pair, name string) netip.Addr {
	t.Helper()
	var a netip.Addr
	v.Do(t, func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		a, err = linkLocal(ifi)
		return err
	})
	return a
}

// solicitedAfterRead waits for the report of the solicitation the listener
// sent as it opened: it comes after a Read at or after it, so the window
// reckons from everything heard before it.
func solicitedAfterRead(t *testing.T, reports chan report) {
	t.Helper()
	var read time.Time
	for {
		r := <-reports
		switch r.kind {
		case "read":
			read = r.at
		case "solicited":
			if read.Before(r.at) {
				t.Fatalf("solicitation at %s reported after a Read at %s only", r.at.Format(time.StampNano), read.Format(time.StampNano))
			}
			return
		}
	}
}

// firstHandedOver sends RA 0 until the listener hands one over (it opens
// asynchronously) and the test takes it: the next RA blocks in the handler.
func firstHandedOver(t *testing.T, tx *ndp.Conn, ras chan heard) {
	t.Helper()
	for {
		if err := tx.WriteTo(ra(0), nil, allNodes); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ras:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
}
