package observe

import (
	"time"

	"github.com/renumber/renumber/internal/digest"
)

// A restart into an unchanged world publishes nothing (FuzzCorroboration):
// when the agent restarts with the world quiet - no adversary word, no
// renumbering, no reopen or flood for ConflictHold plus landing before it,
// nothing pending, the memory's writes not failing - the model keeps the State that did not restart
// running beside the new one (the shadow), fed the same reads, kernel
// events and solicitations. Until the world moves again, every digest the
// restarted agent would publish (once Restated, or once its startup grace
// ran out) must be the shadow's: what an agent that never restarted
// publishes at the same moment. A digest that differs is a Node write a
// restart made on its own.
//
// The model has one router (and the adversary on its address), so it
// cannot play the second router of issue 42's restart doubt (a prefix
// only another router states); the agent's
// TestARestartWithTwoRoutersPublishesNothing does.

// modelGrace is the agent's default startup grace (--startup-grace),
// doubled while a first RA is corroborated.
const modelGrace = 10 * time.Second

// both applies f to the agent's State and, when kept, the shadow's.
func (m *model) both(f func(*State)) {
	f(m.s)
	if m.shadow != nil {
		f(m.shadow)
	}
}

// moved records a move of the world's (op: the adversary's or the
// router's; a restart alone is none) at now: the shadow is dropped.
func (m *model) moved(op byte) {
	if op%8 == 5 && op&0x20 == 0 && op&0x48 == 0x48 {
		return // the agent restarts: restart decides
	}
	m.lastMove, m.shadow = m.now, nil
}

// quiet reports whether the world has been quiet long enough at now for
// a restart's digest to be compared with the shadow's.
func (m *model) quiet() bool {
	l := m.s.links["eth0"]
	// A memory whose writes fail is not the one the agent holds: the
	// restart falls back on the digest's seed, whose one write is known
	// (docs/security.md; FuzzCorroboration f521cb929ca31de9).
	if m.b != nil {
		return false // one router's world (FuzzTwoRouters does not compare)
	}
	if m.now.Before(m.lastMove.Add(m.s.ConflictHold+2*m.landing())) || m.echo || !m.gap.IsZero() || m.drop > 0 || m.memoryStuck ||
		!m.lostAt.IsZero() || !m.r.land.IsZero() || !l.sawRA || len(m.s.Conflicts("eth0", m.now)) > 0 {
		return false
	}
	for _, sp := range l.speakers {
		if sp.pending != nil {
			return false
		}
	}
	return true
}

// checkQuietRestart compares the digest n the restarted agent would
// publish with the shadow's.
func (m *model) checkQuietRestart(n digest.Node) {
	if m.shadow == nil {
		return
	}
	want, _ := m.shadow.Snapshot(m.now)
	grace := m.restartAt.Add(modelGrace)
	if m.s.Corroborating() {
		grace = grace.Add(modelGrace)
	}
	if !m.s.Restated() && m.now.Before(grace) {
		return // the agent holds its first digest
	}
	got, err := digest.Encode(n)
	if err != nil {
		m.fail("encode: %v", err)
	}
	w, err := digest.Encode(want)
	if err != nil {
		m.fail("encode: %v", err)
	}
	if got != w {
		m.fail("restarted at +%s into a world quiet since +%s: publishes %q, an agent that did not restart %q",
			m.restartAt.Sub(t0), m.lastMove.Sub(t0), got, w)
	}
}
