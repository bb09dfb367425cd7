package observe

import (
	"testing"
	"time"

	"github.com/renumber/renumber/internal/agent/policy"
)

// followingDeprecated is a State on eth0 whose DynamicPrefixes follow a
// prefix the router advertises only deprecated.
func followingDeprecated() *State {
	s := believing(New("eth0"))
	s.SetPolicies(map[string]policy.Policy{"eth0": {GlobalOnly: true, FollowDeprecated: true}})
	return s
}

func TestADeprecatedPrefixStandsInOnlyWhereAsked(t *testing.T) {
	ads := []RAPrefix{{ula, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, false}}
	s := followingDeprecated()
	s.RA("eth0", routerA, t0, ads)
	if got, want := encode(t, s, t0), "v1;eth0=2001:db8:a::/64 p ra"; got != want {
		t.Errorf("following deprecated: %s, want %s", got, want)
	}
	plain := globalOnly("eth0")
	plain.RA("eth0", routerA, t0, ads)
	if got, want := encode(t, plain, t0), "v1;eth0=2001:db8:a::/64 d3600 ra"; got != want {
		t.Errorf("not following deprecated: %s, want %s", got, want)
	}
	// A router that prefers an acceptable prefix: it votes itself, nothing
	// stands in.
	s.RA("eth0", routerA, t0.Add(time.Second), []RAPrefix{{pB, time.Hour, 30 * time.Minute, true}, {pA, time.Hour, 0, false}})
	if got, want := encode(t, s, t0.Add(time.Second)), "v1;eth0=2001:db8:a::/64 d3600 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("with a preferred prefix: %s, want %s", got, want)
	}
}

func TestTheRenumberedPrefixStandsInOnceItOutlivesTheOld(t *testing.T) {
	s := followingDeprecated()
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, 0, false}})
	encode(t, s, t0)
	// The router renumbers: B with its whole valid lifetime, A with little left.
	at := t0.Add(10 * time.Minute)
	s.RA("eth0", routerA, at, []RAPrefix{{pB, time.Hour, 0, false}, {pA, 5 * time.Minute, 0, false}})
	if got, want := encode(t, s, at), "v1;eth0=2001:db8:a::/64 d300 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("after the renumbering: %s, want %s", got, want)
	}
}

func TestTwoPrefixesAdvertisedAlikeDoNotTakeTurns(t *testing.T) {
	s := followingDeprecated()
	s.RA("eth0", routerA, t0, []RAPrefix{{pB, time.Hour, 0, false}})
	encode(t, s, t0)
	// A appears with 30 s more: not enough to replace B.
	at := t0.Add(30 * time.Second)
	s.RA("eth0", routerA, at, []RAPrefix{{pB, time.Hour, 0, false}, {pA, time.Hour + 30*time.Second, 0, false}})
	if got, want := encode(t, s, at), "v1;eth0=2001:db8:a::/64 d3630 ra,2001:db8:b::/64 p ra"; got != want {
		t.Errorf("%s, want B still standing in: %s", got, want)
	}
}

func TestALaterRouterNeverStandsIn(t *testing.T) {
	s := followingDeprecated()
	s.RA("eth0", routerA, t0, []RAPrefix{{pA, time.Hour, 0, false}})
	encode(t, s, t0)
	// Another host starts advertising B deprecated, valid forever.
	at := t0.Add(time.Second)
	s.RA("eth0", routerB, at, []RAPrefix{{pB, Infinite, 0, false}})
	got := encode(t, s, at)
	if want := "v1;eth0=2001:db8:a::/64 p ra,2001:db8:b::/64 d4294967295 ra"; got != want {
		t.Errorf("%s, want A standing in, B deprecated: %s", got, want)
	}
}
