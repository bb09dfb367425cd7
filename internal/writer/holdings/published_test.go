package holdings

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// addresses returns n addresses under prefix (a string ending in "::"),
// from 1.
func addresses(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%x", prefix, i+1))
	}
	return out
}

// The caches keep MaxKeptPublished published addresses of one object whole
// and only the prefixes of the rest (a tenant decides how many there are):
// every address published is in what is kept or inside a kept prefix, the
// prefixes are as fine as maxMore of them allow, and bounding what was
// bounded changes nothing (a list page is slimmed, then the transform).
func TestWhatACacheKeepsOfPublishedAddressesIsBoundedAndMissesNone(t *testing.T) {
	own := addresses("2001:db8:eeee::", MaxKeptPublished)
	webs := "2001:db8:b:0:ffff::1"
	spread := func(n int) []string { // n addresses in n /112s of one /64
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("2001:db8:c:0:%x::1", i+1))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		published []string
		want      []string // the /112s, /64s or ::/0 kept past the bound
	}{
		{"within the bound", own, nil},
		{"one past it: its /112", append(slices.Clone(own), webs), []string{"2001:db8:b:0:ffff::/112"}},
		{"past it, IPv4 and junk are dropped", append(slices.Clone(own), "192.0.2.1", "x", webs), []string{"2001:db8:b:0:ffff::/112"}},
		{"many in one /112", append(slices.Clone(own), addresses("2001:db8:b:0:ffff::", 500)...), []string{"2001:db8:b:0:ffff::/112"}},
		{"in maxMore /112s", append(slices.Clone(own), spread(maxMore)...), func() []string {
			var out []string
			for i := range maxMore {
				out = append(out, fmt.Sprintf("2001:db8:c:0:%x::/112", i+1))
			}
			return out
		}()},
		{"in more /112s: their /64s", append(append(slices.Clone(own), spread(maxMore)...), webs), []string{"2001:db8:c::/64", "2001:db8:b::/64"}},
		{"in more /64s: anywhere", append(slices.Clone(own), func() []string {
			var out []string
			for i := range maxMore + 1 {
				out = append(out, fmt.Sprintf("2001:db8:%x::1", i+1))
			}
			return out
		}()...), []string{"::/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, more := Bounded(tc.published)
			var got []string
			for _, p := range more {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the prefixes kept past the bound (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(own, kept); diff != "" {
				t.Errorf("the addresses kept whole (-want +got):\n%s", diff)
			}
			for _, a := range tc.published {
				if _, err := netip.ParseAddr(a); err == nil && !slices.Contains([]string{"192.0.2.1"}, a) && !AmongPublished(append(slices.Clone(kept), got...), a) {
					t.Errorf("%s is published and neither kept nor inside a kept prefix", a)
				}
			}
			again, moreAgain := Bounded(append(slices.Clone(kept), got...))
			if !slices.Equal(again, kept) || !slices.Equal(moreAgain, more) {
				t.Errorf("bounding what was bounded gave %v %v, want %v %v", again, moreAgain, kept, more)
			}
		})
	}
}

// A Service's status.loadBalancer.ingress as the Service cache keeps it,
// slimmed twice (a list page, then the transform), reads as published past
// the bound.
func TestAServicePublishingPastTheBoundIsReadAsPublishingMore(t *testing.T) {
	s := &corev1.Service{}
	for _, a := range append(addresses("2001:db8:eeee::", MaxKeptPublished), "2001:db8:b:0:ffff::1") {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a})
	}
	m := ReadService(Slim(s, DefaultTargetKeys), DefaultTargetKeys)
	if len(m.Ingress) != MaxKeptPublished || !AmongPublished(m.Published(), "2001:db8:b:0:ffff::1") {
		t.Errorf("read %d addresses and %v past them; want %d and 2001:db8:b:0:ffff::1 among them", len(m.Ingress), m.More, MaxKeptPublished)
	}
}

// Past the bound, only what lies in the DynamicPrefixes' space is kept, and
// never coarser than a prefix of that space: a tenant's surplus spread over
// nine /64s far from home is dropped, not summarised as ::/0 (red team r9b),
// while web's next address past the bound, in the space, is still found,
// however the tenant spreads the rest (red team r7a).
func TestPastTheBoundOnlyTheSpaceIsKept(t *testing.T) {
	home := netip.MustParsePrefix("2001:db8:b::/56") // a delegation
	space := []netip.Prefix{home, netip.MustParsePrefix("2001:db8:a::/64")}
	own := addresses("2001:db8:eeee::", MaxKeptPublished)
	var far, near []string
	for i := range 9 {
		far = append(far, fmt.Sprintf("2001:db8:eeee:%x::1", i+1))
		near = append(near, fmt.Sprintf("2001:db8:b:%x::1", i+1))
	}
	const webs = "2001:db8:b:0:ffff::1"
	for _, tc := range []struct {
		name      string
		published []string
		want      []netip.Prefix
	}{
		{"surplus far from every prefix: dropped", slices.Concat(own, far), nil},
		{"web's next past the far surplus: its /112", slices.Concat(own, far, []string{webs}),
			[]netip.Prefix{netip.MustParsePrefix("2001:db8:b:0:ffff::/112")}},
		{"surplus over nine /64s of the delegation: the delegation, never ::/0", slices.Concat(own, near, []string{webs}),
			[]netip.Prefix{home}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept, more := BoundedIn(tc.published, space)
			if diff := cmp.Diff(own, kept); diff != "" {
				t.Errorf("kept whole (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, more, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("kept as prefixes (-want +got):\n%s", diff)
			}
			got := slices.Clone(kept)
			for _, p := range more {
				got = append(got, p.String())
			}
			for _, a := range tc.published {
				if in := slices.ContainsFunc(space, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) }); in && !AmongPublished(got, a) {
					t.Errorf("%s, in the space, is missed", a)
				}
			}
			if again, moreAgain := BoundedIn(got, space); !slices.Equal(again, kept) || !slices.Equal(moreAgain, more) {
				t.Errorf("bounding what was bounded changed it: %v %v", again, moreAgain)
			}
		})
	}
}
