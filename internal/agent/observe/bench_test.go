package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// BenchmarkSteadyRA is what one periodic RA costs the agent when nothing changed:
// fold it into the state, snapshot, encode (the publisher then compares strings).
func BenchmarkSteadyRA(b *testing.B) {
	s := globalOnly("eth0")
	ra := []RAPrefix{{pA, time.Hour, 30 * time.Minute, true}, {pB, time.Hour, 0, true}}
	s.Address("eth0", Address{Addr: addr(pA, 1), Valid: time.Hour, Preferred: 30 * time.Minute}, false, t0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		s.RA("eth0", routerA, now, ra)
		n, _ := s.Snapshot(now)
		if _, err := digest.Encode(n); err != nil {
			b.Fatal(err)
		}
	}
}
