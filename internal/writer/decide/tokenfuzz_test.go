package decide

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
)

// FuzzAStolenTokenInTheBallotsMemory plays the stolen writer token against
// the ballot's memory of the agents' DHCPv6 client (status.dhcpv6pd): the
// pdWorld of FuzzBallot with every node honest (the liar never reports),
// where the script's lies are status writes instead - any time (past,
// future, now), any role (a node, the silent one, nobody), any backing and
// lifetime - each one renumber-writer-status admits (forge). After every
// pass pdWorld's properties hold: nothing the server never delegated is
// current, a replaced delegation drains no longer than the server stated,
// the writer never asks to be woken at or before now; and once the token
// stops, the server's binding is followed within the rotation's bound.
func FuzzAStolenTokenInTheBallotsMemory(f *testing.F) {
	f.Add([]byte{0x00, 3, 0, 30, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 3, 0, 30, 3})
	// since in the future while the client and the confirmer disagree
	// (a renumbering the client has not renewed into): before, no rotation.
	f.Add([]byte{0x02, 3, 1, 2, 1, 5, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 30, 2, 1, 0, 30, 0, 30})
	// unconfirmedSince long past under trustClientAfter 3m.
	f.Add([]byte{0x11, 3, 1, 3, 5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 20, 3})
	// since in year 1 while two nodes disagree: now.Sub saturated and the
	// wake landed in year ~293, before now (red team r6b).
	f.Add([]byte{0x00, 3, 1, 2, 1, 5, 4, 0xff, 1, 0, 30, 2, 1, 0, 30, 0, 30})
	f.Fuzz(func(t *testing.T, script []byte) {
		script = script[:min(len(script), maxScript)]
		s := &script
		b := next(s)
		w := newPDWorld(2+int(b)%3, false, trustAfters[b>>4&3])
		w.token = true
		w.run(t, s)
	})
}

// forge is the token's write of status.dhcpv6pd, from the script, in the
// shapes renumber-writer-status admits: times in RFC 3339 UTC (any: near
// now, 100000 h either side, year 1, year 9999), validLifetime no higher
// than the status's while the current prefix stays, a backing's companions
// only with it, a confirmer once named never dropped (nodeNames is empty
// here: any node may be named).
func (w *pdWorld) forge(s *[]byte) {
	pd := dynamicprefix.DHCPv6PDStatus{}
	if w.st.DHCPv6PD != nil {
		pd = *w.st.DHCPv6PD
	}
	names := []string{"", w.liar.name}
	for _, h := range w.honest {
		names = append(names, h.name)
	}
	prefixes := []string{"", serverPrefix(w.serial).String(), serverPrefix(w.serial + 1).String(), "2001:db8:bad::/56", w.st.CurrentPrefix}
	times := []time.Duration{-100000 * time.Hour, -time.Hour, -ConfirmWithin, 0, ConfirmWithin, 100000 * time.Hour}
	at := func(i byte) string {
		switch {
		case i == 0xff: // the earliest it admits: now.Sub saturates (red team r6b)
			return "0001-01-01T00:00:01Z"
		case i == 0xfe:
			return "9999-12-31T23:59:59Z"
		case i%7 == 6:
			return ""
		}
		return w.now.Add(times[int(i%7)]).UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	mask := next(s)
	if mask&1 != 0 {
		pd.ClientNode = names[int(next(s))%len(names)]
	}
	if mask&2 != 0 {
		if n := names[int(next(s))%len(names)]; n != "" || pd.ConfirmerNode == "" {
			pd.ConfirmerNode = n
		}
	}
	if mask&4 != 0 {
		pd.Since, pd.Unconfirmed = at(next(s)), prefixes[int(next(s))%len(prefixes)]
	}
	if mask&8 != 0 {
		pd.Backing, pd.BackedAgainst, pd.BackingKept = prefixes[int(next(s))%len(prefixes)], prefixes[int(next(s))%len(prefixes)], next(s)%2 == 0
		if pd.Backing == "" {
			pd.BackedAgainst, pd.BackingKept = "", false
		}
	}
	if mask&16 != 0 {
		pd.UnconfirmedSince = at(next(s))
	}
	if mask&32 != 0 {
		pd.OtherOffered = at(next(s))
	}
	if mask&64 != 0 {
		lifetimes := []int64{1, 60, 600, 3600, 1 << 31}
		if v := lifetimes[int(next(s))%len(lifetimes)]; pd.ValidLifetime == 0 || v <= pd.ValidLifetime {
			pd.ValidLifetime = v
		}
	}
	if pd == (dynamicprefix.DHCPv6PDStatus{}) {
		w.st.DHCPv6PD = nil
		return
	}
	w.st.DHCPv6PD = &pd
}
