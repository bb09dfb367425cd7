package decide

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
)

// trustClientAfter against one liar (issue 42, "one node"): the documented price
// of the bound is a liar CLIENT whose confirmers are kept from confirming
// (a LAN accomplice, or with two eligible nodes the only other node). With
// three eligible nodes and no accomplice, the honest confirmers are offered
// the server's real binding: the rotation must take the client role from
// the liar before its forgery counts - for every bound the spec accepts
// (1m to 720h) and every --dhcpv6-confirm-within.

// roleWorld passes the writer every step over three nodes a (the liar,
// named client), b and c (honest: the client holds what the server binds,
// the confirmer is offered it), the status fed back as the API server
// keeps it. It returns how long, in all, the liar's forgery was current,
// when it first was, and how long the server's real prefix was out of the
// pools.
func roleWorld(t *testing.T, after string, step, until time.Duration) (forged time.Duration, first time.Time, unpooled time.Duration) {
	t.Helper()
	m := trusting(after)
	st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
	for at := time.Duration(0); at <= until; at += step {
		digests := []string{heldZ, offeredA, offeredA}
		for i, n := range []string{"b", "c"} {
			if st.DHCPv6PD != nil && st.DHCPv6PD.ClientNode == n {
				digests[i+1] = heldA
			}
		}
		d := For(m, st, reports(t, digests...), t0.Add(at))
		if d.Current.String() == "2001:db8:bad::/56" {
			forged += step
			if first.IsZero() {
				first = t0.Add(at)
			}
		}
		if !slices.Contains(d.Pooled, netip.MustParsePrefix(trustCurrent)) {
			unpooled += step
		}
		st = stored(t, st, pdStatus(d))
	}
	return forged, first, unpooled
}

// With three eligible nodes, a liar client and no LAN accomplice, the
// forgery is never current, whatever the bound - the two honest nodes
// are offered the real binding alike, and take the client over.
func TestNoBoundTrustsALiarClientTheRotationReplaces(t *testing.T) {
	for _, c := range []struct {
		after  string
		within time.Duration // --dhcpv6-confirm-within
	}{
		{"1m", 2 * time.Minute}, // the bound's floor under the default
		{"2m", 2 * time.Minute},
		{"3m", 2 * time.Minute},
		{"10m", 15 * time.Minute}, // a longer confirm-within the flag allows
	} {
		t.Run(fmt.Sprintf("trustClientAfter %s, confirm-within %v", c.after, c.within), func(t *testing.T) {
			defer func(was time.Duration) { ConfirmWithin = was }(ConfirmWithin)
			ConfirmWithin = c.within
			if forged, first, unpooled := roleWorld(t, c.after, 10*time.Second, 2*time.Hour); forged > 0 || unpooled > 0 {
				t.Errorf("the liar client's forgery was current from %v, %v in all, and the server's prefix out of the pools %v; want never (three nodes, honest confirmers offered the real binding)", first.Sub(t0), forged, unpooled)
			}
		})
	}
}

// After a trusted forgery is replaced (the rotation took the client over),
// how long does it stay pooled? Nothing but the liar ever stated it; the
// liar keeps saying it holds it, preferred or deprecated with the longest
// lifetime a digest carries.
func TestATrustedForgeryReplacedLeavesThePools(t *testing.T) {
	zDep, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "wan", Prefixes: []digest.Prefix{{Prefix: netip.MustParsePrefix("2001:db8:bad::/56"), Deprecated: true, Remaining: (digest.MaxLifetime - 1) * time.Second, Sources: digest.SourcePD}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, after string }{{"preferred", heldZ}, {"deprecated, the longest lifetime", zDep}} {
		t.Run(c.name, func(t *testing.T) {
			m := trusting("1m")
			st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
			var trusted, replaced, last time.Time
			for at := time.Duration(0); at <= 48*time.Hour; at += 10 * time.Second {
				digests := []string{heldZ, offeredA, offeredA}
				if !replaced.IsZero() {
					digests[0] = c.after
				}
				for i, n := range []string{"b", "c"} {
					if st.DHCPv6PD != nil && st.DHCPv6PD.ClientNode == n {
						digests[i+1] = heldA
					}
				}
				d := For(m, st, reports(t, digests...), t0.Add(at))
				z := netip.MustParsePrefix("2001:db8:bad::/56")
				if d.Current == z && trusted.IsZero() {
					trusted = t0.Add(at)
				}
				if !trusted.IsZero() && d.Current != z && replaced.IsZero() {
					replaced = t0.Add(at)
				}
				if slices.Contains(d.Pooled, z) {
					last = t0.Add(at)
				}
				st = stored(t, st, pdStatus(d))
			}
			t.Logf("forgery current %v..%v, pooled until %v", trusted.Sub(t0), replaced.Sub(t0), last.Sub(t0))
			if !replaced.IsZero() && last.Sub(replaced) > ConfirmWithin {
				t.Errorf("the forgery, replaced at %v, stayed pooled until %v", replaced.Sub(t0), last.Sub(t0))
			}
		})
	}
}

// Write churn: a liar client flapping its claim between the confirmed
// prefix and a forgery, or between a forgery and nothing, every pass,
// writes no more status with trustClientAfter set than without it.
func TestAFlappingClientWritesNoMoreWithTheBound(t *testing.T) {
	writes := func(after string, claims []string) int {
		m := trusting(after)
		st := Status{CurrentPrefix: trustCurrent, PrefixSource: "dhcpv6-pd", DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: "a", ConfirmerNode: "b"}}
		n := 0
		for i := range 360 {
			d := For(m, st, reports(t, claims[i%len(claims)], offeredA, offeredA), t0.Add(time.Duration(i)*10*time.Second))
			next := stored(t, st, pdStatus(d))
			if !reflect.DeepEqual(next, st) {
				n++
			}
			st = next
		}
		return n
	}
	for _, claims := range [][]string{{heldA, heldZ}, {heldZ, silent}, {heldZ, heldB}, {heldA, heldA, heldZ}} {
		without, with := writes("", claims), writes("3m", claims)
		t.Logf("%q: %d status writes in an hour by default, %d with trustClientAfter 3m", claims, without, with)
		if with > without {
			t.Errorf("%q: %d status writes in an hour with trustClientAfter 3m, %d without", claims, with, without)
		}
	}
}
