package dhcp6

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// A forger that copies the pinned server's DUID (the client multicasts it in
// every Request and Renew) and answers first (issue 42, item 7). The server
// answers throughout; the client must not believe more than it said.

// copier answers, as the server's DUID and 1 ms after the question (long
// before the server), the messages for which say returns an answer.
func copier(say func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message) func(*simLink, *dhcpv6.Message) {
	return answersFirst(func(l *simLink) dhcpv6.DUID { return l.server.duid }, say)
}

// answersFirst answers, as the DUID as names and 1 ms after the question,
// the messages for which say returns an answer.
func answersFirst(as func(*simLink) dhcpv6.DUID, say func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message) func(*simLink, *dhcpv6.Message) {
	return func(l *simLink, m *dhcpv6.Message) {
		if a := say(m, as(l)); a != nil {
			l.forge(time.Millisecond, a)
		}
	}
}

// shortening answers every Renew and Rebind with the prefix asked for,
// valid for one second.
func shortening(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
	if m.MessageType != dhcpv6.MessageTypeRenew && m.MessageType != dhcpv6.MessageTypeRebind {
		return nil
	}
	p, _ := prefixOf(m.Options.OneIAPD().Options.Prefixes()[0].Prefix)
	return forgedAnswer(m, duid, p, iana.StatusSuccess, time.Second, time.Second, time.Second, time.Second, 0)
}

// preferred255 answers every Solicit with Preference 255 and every Request
// with its own prefix, pdX.
func preferred255(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest:
		return forgedAnswer(m, duid, pdX, iana.StatusSuccess, time.Hour, 2*time.Hour, 30*time.Minute, 48*time.Minute, 255)
	}
	return nil
}

// simChecks fails t when the client believes more than the server said:
// a prefix it never delegated, lifetimes or timers past what it stated.
func simChecks(t *testing.T, r *simRun) {
	r.l.step = func() {
		now := r.l.clk.Now()
		if r.held.IsValid() && now.After(r.heldUntil) {
			t.Fatalf("at %s: %s still held, valid until %s", now.Format(time.TimeOnly), r.held, r.heldUntil.Format(time.TimeOnly))
		}
	}
	report := r.c.Report
	r.c.Report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
		s, ok := r.l.stated[p]
		switch {
		case removed:
		case !ok:
			t.Fatalf("bound %s, which the server never delegated", p)
		case at.Add(valid).After(s.valid):
			t.Fatalf("%s valid until %s, the server said %s", p, at.Add(valid).Format(time.TimeOnly), s.valid.Format(time.TimeOnly))
		}
		report(p, valid, removed, at)
	}
}

// lengthening answers every Renew with the prefix asked for, for days.
func lengthening(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
	if m.MessageType != dhcpv6.MessageTypeRenew {
		return nil
	}
	return forgedAnswer(m, duid, pdA, iana.StatusSuccess, 24*time.Hour, 48*time.Hour, 24*time.Hour, 36*time.Hour, 0)
}

func either(says ...func(*dhcpv6.Message, dhcpv6.DUID) *dhcpv6.Message) func(*dhcpv6.Message, dhcpv6.DUID) *dhcpv6.Message {
	return func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
		for _, say := range says {
			if a := say(m, duid); a != nil {
				return a
			}
		}
		return nil
	}
}

// Within the first lease's valid lifetime, whatever the copier says, the
// client holds the server's prefix (or, when it speaks from the first
// Solicit, nothing), believes no lifetime beyond the server's, and reports
// the conflict.
func TestACopierOfTheServersDUIDMovesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		says func(*dhcpv6.Message, dhcpv6.DUID) *dhcpv6.Message
		// bound: the copier speaks once the server's lease is bound (else
		// from the first Solicit).
		bound bool
		want  []simReport
	}{
		{"a lifetime of one second", shortening, true, []simReport{{Prefix: pdA}}},
		{"a lifetime of days", lengthening, true, []simReport{{Prefix: pdA}}},
		{"Preference 255 and another prefix", preferred255, false, nil},
		// Issue 42, item 7: the client used to bind 2001:db8:bad::/56 within 3 s.
		{"a lifetime of one second, then Preference 255 and another prefix", either(shortening, preferred255), true, []simReport{{Prefix: pdA}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newSimLink(t, homeServer())
			l.horizon = l.clk.Now().Add(9 * time.Minute)
			r := newSimRun(t, l)
			simChecks(t, r)
			step := l.step
			l.step = func() {
				step()
				if !c.bound || r.held.IsValid() {
					l.adversary = copier(c.says)
				}
			}
			r.run(t)
			if !sameReports(r.reports, c.want) {
				t.Errorf("reports %v, want %v", r.reports, c.want)
			}
			if len(r.conflicts) == 0 {
				t.Error("no conflict reported")
			}
		})
	}
}

// Where the server's own answers and a forger's disagree, nothing moves
// until the lease the server stated runs out; then the client asks anew.
func TestAStallIsBoundedByTheLifetimeTheServerStated(t *testing.T) {
	s := homeServer()
	l := newSimLink(t, s)
	l.horizon = l.clk.Now().Add(19 * time.Minute)
	r := newSimRun(t, l)
	simChecks(t, r)
	start := l.clk.Now()
	step := l.step
	l.step = func() {
		step()
		if r.held == pdA && s.prefix == pdA && l.clk.Now().After(start.Add(time.Minute)) {
			// The ISP renumbers; a forger replays the old delegation to every Renew and Rebind.
			s.prefix = pdB
			l.adversary = copier(func(m *dhcpv6.Message, duid dhcpv6.DUID) *dhcpv6.Message {
				if m.MessageType != dhcpv6.MessageTypeRenew && m.MessageType != dhcpv6.MessageTypeRebind {
					return nil
				}
				return forgedAnswer(m, duid, pdA, iana.StatusSuccess, s.preferred, s.valid, s.t1, s.t2, 0)
			})
		}
	}
	r.run(t)
	want := []simReport{{Prefix: pdA}, {Prefix: pdA, Removed: true}, {Prefix: pdB}}
	if !sameReports(r.reports, want) {
		t.Fatalf("reports %v, want %v", r.reports, want)
	}
	if end, bound := r.reports[1].At, r.reports[0].At.Add(r.reports[0].Valid); end.Before(bound) {
		t.Errorf("%s withdrawn at %s, before the valid lifetime the server stated ended (%s)", pdA, end, bound)
	}
	if len(r.conflicts) == 0 {
		t.Error("no conflict reported")
	}
}

// sameReports compares prefixes and removals, ignoring times and renewals
// (a report repeating the one before).
func sameReports(got, want []simReport) bool {
	got = slices.CompactFunc(slices.Clone(got), func(a, b simReport) bool { return a.Prefix == b.Prefix && a.Removed == b.Removed })
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Prefix != want[i].Prefix || got[i].Removed != want[i].Removed {
			return false
		}
	}
	return true
}

// With nobody else speaking, the server's renumbering lands one exchange
// after the Renew that asks for it - the server's delay and collectWindow -
// or, after NoBinding, three (Renew, Solicit, Request); and nothing is
// reported in conflict.
func TestARenumberingLandsWithinTheServersDelayAndTheWindow(t *testing.T) {
	const delay = 100 * time.Millisecond
	for _, c := range []struct {
		name      string
		noBinding bool
		want      time.Duration
	}{
		{"the new prefix in the Reply", false, delay + collectWindow},
		{"NoBinding", true, 3 * (delay + collectWindow)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := homeServer()
			s.delay, s.noBinding = answerIn(delay), c.noBinding
			l := newSimLink(t, s)
			l.horizon = l.clk.Now().Add(time.Hour)
			r := newSimRun(t, l)
			simChecks(t, r)
			var renew, landed time.Time
			report := r.c.Report
			r.c.Report = func(p netip.Prefix, valid time.Duration, removed bool, at time.Time) {
				report(p, valid, removed, at)
				if p == pdB && landed.IsZero() {
					landed = l.clk.Now()
				}
			}
			step := l.step
			l.step = func() {
				step()
				switch {
				case r.held == pdA && s.prefix == pdA:
					s.prefix = pdB // the ISP renumbers while the client waits for T1
				case s.prefix == pdB && renew.IsZero() && len(l.sent) > 2:
					renew = l.sentAt[2]
				}
			}
			r.run(t)
			if got := landed.Sub(renew); renew.IsZero() || got != c.want {
				t.Errorf("landed %s after the Renew, want %s", got, c.want)
			}
			t.Logf("%s: %s landed %s after the Renew that asked", c.name, pdB, landed.Sub(renew))
			if len(r.conflicts) > 0 {
				t.Errorf("conflicts reported at %v with nobody else speaking", r.conflicts)
			}
		})
	}
}
