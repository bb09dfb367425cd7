package observe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/renumber/renumber/internal/agent/policy"
)

// A memory put back into a new State is the memory it came from: the same
// words, ends, flags and seniority.
func TestAMemoryRoundTrips(t *testing.T) {
	s := agreed(t)
	s.RA("eth0", routerB, t0.Add(10*time.Second), offer(pC)) // the first word since the last solicitation: its answer
	now := t0.Add(time.Minute)
	mustSnapshot(s, now)
	want := s.Memory(now)
	if len(want.Links) != 1 || len(want.Links[0].Words) != 2 {
		t.Fatalf("memory %+v, want routerA's A and routerB's C", want)
	}
	s2 := newState()
	if n := s2.Remember(want, now); n != 2 {
		t.Fatalf("remembered %d words, want 2", n)
	}
	if diff := cmp.Diff(want, s2.Memory(now), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("memory after a round trip (-want +got):\n%s", diff)
	}
	if !s2.Senior("eth0", routerA) {
		t.Error("routerA, heard first, is no longer the senior router")
	}
}

// What a memory says is believed until the ends it stores, and no longer:
// words whose valid end passed are not restored, and one whose preferred
// end passed is restored deprecated.
func TestAMemoryIsHeldToItsEnds(t *testing.T) {
	s := agreed(t)
	mem := s.Memory(t0)
	for _, c := range []struct {
		name       string
		at         time.Time
		words      int
		preferredA bool
	}{
		{"before the preferred end", t0.Add(29 * time.Minute), 1, true},
		{"past the preferred end", t0.Add(31 * time.Minute), 1, false},
		{"past the valid end: stale", t0.Add(61 * time.Minute), 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s2 := newState()
			if n := s2.Remember(mem, c.at); n != c.words {
				t.Fatalf("remembered %d words, want %d", n, c.words)
			}
			if got := preferredIn(mustSnapshot(s2, c.at), pA.String()); got != c.preferredA {
				t.Errorf("A preferred: %v, want %v (%s)", got, c.preferredA, encode(t, s2, c.at))
			}
		})
	}
}

// A memory the State did not write (the file is root's, but may be
// garbled or hand-edited) restores no more than the RA table holds, and
// nothing malformed.
func TestAMemoryIsBoundedAndChecked(t *testing.T) {
	end := t0.Add(time.Hour)
	word := func(i int) Remembered {
		p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i)}), 64)
		return Remembered{Router: routerA, Prefix: p, Since: t0, Valid: end, Preferred: end, StatedValid: time.Hour, StatedPreferred: time.Hour, Heard: t0}
	}
	var lm LinkMemory
	lm.Name = "eth0"
	for i := range 1000 {
		lm.Words = append(lm.Words, word(i))
	}
	bad := word(2000)
	bad.Prefix = netip.MustParsePrefix("2001:db8::1/64") // not masked
	noRouter := word(2001)
	noRouter.Router = netip.Addr{}
	lm.Words = append([]Remembered{bad, noRouter}, lm.Words...)
	s := newState()
	if n := s.Remember(Memory{At: t0, Links: []LinkMemory{lm, {Name: "eth9", Words: lm.Words}}}, t0); n != maxRAEntries {
		t.Errorf("remembered %d words, want the RA table's cap %d", n, maxRAEntries)
	}
	if n := s.RAEntries("eth0"); n != maxRAEntries {
		t.Errorf("eth0 holds %d RA entries, want %d", n, maxRAEntries)
	}
}

// A word from a router trustedRouters no longer names (changed while the
// agent was down) is not put back: only a router trusted now is believed.
func TestAMemoryBelievesOnlyRoutersTrustedNow(t *testing.T) {
	end := t0.Add(time.Hour)
	words := []Remembered{
		{Router: routerA, Prefix: pA, Since: t0, Valid: end, Preferred: end, StatedValid: time.Hour, StatedPreferred: time.Hour, Heard: t0},
		{Router: routerB, Prefix: pB, Since: t0, Valid: end, Preferred: end, StatedValid: time.Hour, StatedPreferred: time.Hour, Heard: t0},
	}
	s := newState()
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, Trusted: []netip.Addr{routerA}}})
	if n := s.Remember(Memory{At: t0, Links: []LinkMemory{{Name: "eth0", Words: words}}}, t0); n != 1 {
		t.Errorf("remembered %d words, want routerA's alone", n)
	}
	if got := s.Routers("eth0", pB); len(got) != 0 {
		t.Errorf("%v offers %v from memory, though no longer trusted", got, pB)
	}
}

// The memory is written when what it says moves, not on every RA: a
// router re-sending alike moves the ends a little each time.
func TestAMemoryMovesOnChangesAndCoarseEnds(t *testing.T) {
	s := agreed(t)
	// The router's first re-send, corroborated: it re-sends alike.
	resent(t, s, t0.Add(30*time.Second))
	start := t0.Add(time.Minute)
	s.Settle(start)
	last := s.Memory(start)
	if !last.Links[0].Words[0].Alike {
		t.Fatalf("memory %+v: the router's re-send is not taken as alike", last)
	}
	writes := 0
	for at := start.Add(10 * time.Second); at.Before(start.Add(10 * time.Minute)); at = at.Add(10 * time.Second) {
		s.RA("eth0", routerA, at, offer(pA))
		mustSnapshot(s, at)
		if m := s.Memory(at); m.Moved(last, MemoryQuantum) {
			writes++
			last = m
		}
	}
	// 10 min of RAs every 10 s moving the ends 10 s each: one write per
	// minute and a bit, not 60.
	if writes < 8 || writes > 10 {
		t.Errorf("%d writes in 10 min of alike RAs, want one per quantum (about 9)", writes)
	}
	for _, c := range []struct {
		name string
		edit func(*Remembered)
		want bool
	}{
		{"nothing", func(*Remembered) {}, false},
		{"an end a second later", func(r *Remembered) { r.Valid = r.Valid.Add(time.Second) }, false},
		{"an end past the quantum", func(r *Remembered) { r.Preferred = r.Preferred.Add(MemoryQuantum + time.Second) }, true},
		{"an end a second earlier", func(r *Remembered) { r.Preferred = r.Preferred.Add(-time.Second) }, true},
		{"an end that never comes", func(r *Remembered) { r.Valid = time.Time{} }, true},
		{"doubted", func(r *Remembered) { r.Doubted = true }, true},
		{"another prefix", func(r *Remembered) { r.Prefix = pC }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := s.Memory(t0.Add(10 * time.Minute))
			w := m.Links[0].Words[0]
			c.edit(&m.Links[0].Words[0])
			m2 := s.Memory(t0.Add(10 * time.Minute))
			m2.Links[0].Words[0] = w
			if got := m.Moved(m2, MemoryQuantum); got != c.want {
				t.Errorf("Moved = %v, want %v", got, c.want)
			}
		})
	}
}
