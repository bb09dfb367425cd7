package decide

import (
	"net/netip"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
)

// FuzzTrustAgainstOneLiar plays one liar node WITHOUT a LAN accomplice against
// trustClientAfter in three or four eligible nodes: the honest agents act
// on the last status at every pass (the client holds the server's binding,
// the confirmer is offered it), every honest node stays Ready, no second
// server speaks; the liar writes any digest from a menu at any step, goes
// NotReady and back, may be first by name, may be the client named at the
// start; the server renumbers; time passes. The bound is 1m, 3m, 10m or 1h
// (the writer waits at least trustAfter: the rotation's turn). Property: what the server
// never delegated is never current - the documented price (a liar client
// whose confirmers are kept from confirming) needs an accomplice here.
func FuzzTrustAgainstOneLiar(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 0, 1, 0, 4, 0, 30, 0, 30, 1, 0, 0, 30, 0, 30})
	f.Fuzz(func(t *testing.T, s []byte) {
		next := func() byte {
			if len(s) == 0 {
				return 0
			}
			b := s[0]
			s = s[1:]
			return b
		}
		cfg := next()
		after := []string{"1m", "3m", "10m", "1h"}[int(cfg)%4]
		n := 3 + int(cfg>>2)%2
		names := []string{"a", "b", "c", "d"}[:n]
		liar := names[0]
		if cfg&0x10 != 0 {
			liar = names[n-1]
		}
		z := netip.MustParsePrefix("2001:db8:bad::/56")
		m := trusting(after)
		serial := 0
		bind := serverPrefix(0)
		gave := map[netip.Prefix]bool{bind: true}
		first := names[0]
		if cfg&0x20 != 0 {
			first = liar
		} else if first == liar {
			first = names[1]
		}
		st := Status{CurrentPrefix: bind.String(), PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: first}}
		now := t0
		liarDigest := "v1;wan="
		liarNotReady := false
		enc := func(ps ...digest.Prefix) string {
			out, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: ps}}})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		noWan, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "eth0"}}})
		if err != nil {
			t.Fatal(err)
		}
		var wake time.Time
		roles := func() [2]string {
			if st.DHCPv6PD == nil {
				return [2]string{}
			}
			return [2]string{st.DHCPv6PD.ClientNode, st.DHCPv6PD.ConfirmerNode}
		}
		// pass is one writer pass over the digests the honest agents
		// report for the last status; each role change it writes is acted
		// on by the honest agents 5 s later, which the writer sees (its
		// Node watch) - another pass.
		pass := func() {
			for range 5 {
				was := roles()
				var r []Report
				for _, name := range names {
					dg := liarDigest
					if name != liar {
						switch {
						case st.DHCPv6PD != nil && st.DHCPv6PD.ClientNode == name:
							dg = enc(digest.Prefix{Prefix: bind, Sources: digest.SourcePD})
						case st.DHCPv6PD != nil && st.DHCPv6PD.ConfirmerNode == name:
							dg = enc(digest.Prefix{Prefix: bind, Sources: digest.SourceOffer, Valid: time.Hour})
						default:
							dg = enc()
						}
					}
					nd, err := digest.Decode(dg)
					if err != nil {
						t.Fatal(err)
					}
					r = append(r, Report{Node: name, Digest: nd, NotReady: name == liar && liarNotReady})
				}
				d := For(m, st, r, now)
				if d.Current.IsValid() && !gave[d.Current] {
					t.Fatalf("at %v (trustClientAfter %s, %d nodes, liar %s %q) current is %v, which the server never delegated; status before %+v",
						now.Sub(t0), after, n, liar, liarDigest, d.Current, st.DHCPv6PD)
				}
				if !d.Wake.IsZero() && !d.Wake.After(now) {
					t.Fatalf("at %v wake at %v", now.Sub(t0), d.Wake)
				}
				wake = d.Wake
				st = stored(t, st, pdStatus(d))
				if roles() == was {
					return
				}
				now = now.Add(5 * time.Second)
			}
		}
		for step := 0; step < 200 && len(s) > 0; step++ {
			switch op := next(); op % 4 {
			case 0:
				// Time passes: the writer passes at every wake it
				// asked for on the way.
				to := now.Add(time.Duration(1+int(next())) * 5 * time.Second)
				for passes := 0; !wake.IsZero() && !wake.After(to); passes++ {
					if passes > 100 {
						t.Fatalf("at %v: more than 100 wakes in %v (last %v; status %+v)", now.Sub(t0), to.Sub(now), wake.Sub(t0), st.DHCPv6PD)
					}
					now = wake
					pass()
				}
				now = to
			case 1:
				serial++
				bind = serverPrefix(serial)
				gave[bind] = true
			case 2:
				liarNotReady = !liarNotReady
			case 3:
				cur, _ := netip.ParsePrefix(st.CurrentPrefix)
				menu := []string{
					enc(digest.Prefix{Prefix: z, Sources: digest.SourcePD}),
					enc(digest.Prefix{Prefix: z, Sources: digest.SourceOffer, Valid: time.Hour}),
					enc(digest.Prefix{Prefix: z, Sources: digest.SourcePD}, digest.Prefix{Prefix: bind, Sources: digest.SourceOffer, Valid: time.Hour}),
					enc(digest.Prefix{Prefix: bind, Sources: digest.SourcePD}),
					enc(digest.Prefix{Prefix: bind, Sources: digest.SourceOffer, Valid: time.Hour}),
					enc(),
					enc(digest.Prefix{Prefix: cur, Sources: digest.SourcePD}),
					enc(digest.Prefix{Prefix: z, Sources: digest.SourcePD}, digest.Prefix{Prefix: z, Sources: digest.SourceOffer, Valid: time.Hour}),
					noWan,
				}
				liarDigest = menu[int(next())%len(menu)]
			}
			pass()
		}
	})
}
