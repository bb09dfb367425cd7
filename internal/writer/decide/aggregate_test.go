package decide

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/model"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func reports(t *testing.T, digests ...string) []Report {
	t.Helper()
	var out []Report
	for i, s := range digests {
		n, err := digest.Decode(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Report{Node: string(rune('a' + i)), Digest: n})
	}
	return out
}

func eth0() dynamicprefix.Spec {
	return dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{Interface: "eth0"}}}
}

// parse parses s as the writer does.
func parse(s dynamicprefix.Spec) model.Model { return model.Parse("home", s) }

// wanPD is a DynamicPrefix following the agents' own DHCPv6 client on wan.
func wanPD() model.Model {
	return parse(dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}})
}

const (
	onA   = "v1;eth0=2001:db8:a::/64 p ra+addr"
	onB   = "v1;eth0=2001:db8:a::/64 d600 ra+addr,2001:db8:b::/64 p ra+addr"
	onBA  = "v1;eth0=2001:db8:a::/64 p ra+addr,2001:db8:b::/64 p ra+addr"
	onlyB = "v1;eth0=2001:db8:b::/64 p ra+addr"
)

// status turns a decision back into the status the writer would have written.
func status(d Decision) Status {
	st := Status{History: d.History, PrefixSource: d.Source}
	if d.Current.IsValid() {
		st.CurrentPrefix = d.Current.String()
	}
	return st
}

func TestFirstAcquisition(t *testing.T) {
	d := For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0)
	if d.Current.String() != "2001:db8:a::/64" || !d.Changed || d.Source != "router-advertisement" {
		t.Fatalf("decision = %s changed=%v source=%s", d, d.Changed, d.Source)
	}
	if len(d.History) != 1 || d.History[0].State != "active" || !d.History[0].AcquiredAt.Equal(t0) {
		t.Errorf("history = %+v", d.History)
	}
}

func TestSteadyStateReproducesTheStatus(t *testing.T) {
	d1 := For(parse(eth0()), Status{}, reports(t, onA, onA), t0)
	d2 := For(parse(eth0()), status(d1), reports(t, onA, onA), t0.Add(time.Hour))
	if d2.Changed || !reflect.DeepEqual(status(d1), status(d2)) {
		t.Errorf("an hour later with the same reports the status changed:\n%+v\n%+v", status(d1), status(d2))
	}
}

func TestChangeFollowsTheMajorityWithoutFlapping(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA, onA, onA), t0))
	// Node a moves first: A keeps the majority.
	d := For(parse(eth0()), st, reports(t, onB, onA, onA), t0.Add(time.Second))
	if d.Changed {
		t.Fatalf("one node of three flipped the prefix: %s", d)
	}
	// Node b follows: B now has two preferred votes, A one.
	d = For(parse(eth0()), st, reports(t, onB, onB, onA), t0.Add(2*time.Second))
	if !d.Changed || d.Current.String() != "2001:db8:b::/64" {
		t.Fatalf("majority moved but decision = %s", d)
	}
	if got := prefixes(d.Pooled); !slices.Equal(got, []string{"2001:db8:b::/64", "2001:db8:a::/64"}) {
		t.Errorf("pooled = %v, want B then draining A", got)
	}
	a := d.History[1]
	if a.State != "draining" || !a.DeprecatedAt.Equal(t0.Add(2*time.Second)) || !a.ExpiresAt.Equal(t0.Add(2*time.Second+600*time.Second)) {
		t.Errorf("A's entry = %+v, want draining with expiresAt 600 s after the change", a)
	}
	// The last node: nothing changes any more.
	d2 := For(parse(eth0()), status(d), reports(t, onB, onB, onB), t0.Add(3*time.Second))
	if d2.Changed || !reflect.DeepEqual(status(d), status(d2)) {
		t.Errorf("the last node's report changed the status")
	}
}

func TestTieKeepsTheCurrentPrefix(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA), t0))
	if d := For(parse(eth0()), st, reports(t, onBA, onBA), t0); d.Changed {
		t.Errorf("a tie moved the prefix: %s", d)
	}
}

func TestDrainingEndsWhenNoNodeReportsIt(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA), t0))
	st = status(For(parse(eth0()), st, reports(t, onB), t0.Add(time.Second)))
	d := For(parse(eth0()), st, reports(t, onlyB), t0.Add(time.Minute))
	if got := prefixes(d.Pooled); !slices.Equal(got, []string{"2001:db8:b::/64"}) {
		t.Errorf("pooled = %v, want only B once A expired everywhere", got)
	}
	if d.History[1].State != "expired" {
		t.Errorf("A = %+v, want expired", d.History[1])
	}
}

func TestDrainingEndsAtItsDeadline(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA), t0))
	d := For(parse(eth0()), st, reports(t, onB), t0)
	if !d.Wake.Equal(t0.Add(600 * time.Second)) {
		t.Fatalf("Wake = %v, want the drain deadline", d.Wake)
	}
	// A node with a stale view still reports A, but its deadline has passed.
	d = For(parse(eth0()), status(d), reports(t, onB), t0.Add(601*time.Second))
	if got := prefixes(d.Pooled); !slices.Equal(got, []string{"2001:db8:b::/64"}) {
		t.Errorf("pooled = %v after the deadline", got)
	}
}

func TestHistoryIsBoundedByCount(t *testing.T) {
	s := eth0()
	s.Transition = &dynamicprefix.Transition{MaxPrefixHistory: 1}
	var st Status
	for i, p := range []string{"a", "b", "c"} {
		// Every earlier prefix is still reported (deprecated), so only the count drops it.
		d := "v1;eth0="
		for j, q := range []string{"a", "b", "c"}[:i+1] {
			if j > 0 {
				d += ","
			}
			state := "d600"
			if q == p {
				state = "p"
			}
			d += "2001:db8:" + q + "::/64 " + state + " ra"
		}
		st = status(For(parse(s), st, reports(t, d), t0.Add(time.Duration(i)*time.Minute)))
	}
	got := []string{}
	for _, h := range st.History {
		got = append(got, h.Prefix+" "+h.State)
	}
	if want := []string{"2001:db8:c::/64 active", "2001:db8:b::/64 draining"}; !slices.Equal(got, want) {
		t.Errorf("history = %v, want %v", got, want)
	}
}

func TestPrefixComingBackIsNotDuplicated(t *testing.T) {
	st := status(For(parse(eth0()), Status{}, reports(t, onA), t0))
	st = status(For(parse(eth0()), st, reports(t, onB), t0.Add(time.Minute)))
	back := "v1;eth0=2001:db8:a::/64 p ra+addr,2001:db8:b::/64 d600 ra+addr"
	d := For(parse(eth0()), st, reports(t, back), t0.Add(2*time.Minute))
	got := []string{}
	for _, h := range d.History {
		got = append(got, h.Prefix+" "+h.State)
	}
	if want := []string{"2001:db8:a::/64 active", "2001:db8:b::/64 draining"}; !slices.Equal(got, want) {
		t.Errorf("history = %v, want %v", got, want)
	}
}

func TestRejections(t *testing.T) {
	s := eth0()
	s.Acquisition.PrefixFilter = &dynamicprefix.PrefixFilter{AllowedPrefixes: []string{"2001:db8:a::/48"}}
	// A rogue router gives node c a foreign prefix and a ULA.
	rogue := "v1;eth0=2001:db8:a::/64 p ra+addr,2001:db8:ff::/64 p ra,fd00::/64 p ra"
	d := For(parse(s), Status{}, reports(t, onA, onA, rogue), t0)
	if d.Current.String() != "2001:db8:a::/64" {
		t.Fatalf("current = %s", d.Current)
	}
	var got []string
	for _, r := range d.Rejected {
		got = append(got, r.Prefix.String()+": "+r.Reason)
	}
	want := []string{"2001:db8:ff::/64: outside allowedPrefixes", "fd00::/64: not global unicast (outside 2000::/3)"}
	if !slices.Equal(got, want) {
		t.Errorf("rejected = %q, want %q", got, want)
	}
}

func TestQuorum(t *testing.T) {
	s := eth0()
	q := 2
	s.Acquisition.Quorum = &q
	if d := For(parse(s), Status{}, reports(t, onA), t0); d.Current.IsValid() {
		t.Errorf("one node adopted a prefix with quorum 2: %s", d)
	}
	if d := For(parse(s), Status{}, reports(t, onA, onA), t0); d.Current.String() != "2001:db8:a::/64" {
		t.Errorf("two nodes did not reach quorum 2: %s", d)
	}
}

func prefixes(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func FuzzDecide(f *testing.F) {
	f.Add(onA, onB, "2001:db8:a::/64", uint8(2))
	f.Fuzz(func(t *testing.T, d1, d2, current string, hist uint8) {
		var rs []Report
		for i, s := range []string{d1, d2} {
			if n, err := digest.Decode(s); err == nil {
				rs = append(rs, Report{Node: string(rune('a' + i)), Digest: n})
			}
		}
		s := eth0()
		s.Transition = &dynamicprefix.Transition{MaxPrefixHistory: int(hist%12) + 1}
		prev := Status{CurrentPrefix: current, History: []HistoryEntry{{Prefix: current, State: "active"}}}
		a := For(parse(s), prev, rs, t0)
		b := For(parse(s), prev, rs, t0)
		if !reflect.DeepEqual(a, b) {
			t.Fatal("not deterministic")
		}
		again := For(parse(s), status(a), rs, t0)
		if again.Changed || !reflect.DeepEqual(status(a), status(again)) {
			t.Fatalf("not a fixed point:\n%+v\n%+v", status(a), status(again))
		}
		if len(a.History) > 11 {
			t.Fatalf("history unbounded: %d", len(a.History))
		}
	})
}

// DHCPv6-PD in host mode: the delegation the nodes report on the PD interface
// is adopted with its own source; the ISP's /64 the same link carries in RAs
// is not (a DynamicPrefix without routerAdvertisement counts delegations
// only), and a DynamicPrefix with both counts each on its own link.
func TestDelegatedPrefixes(t *testing.T) {
	pdOnly := dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}
	wan := "v1;eth0=2001:db8:e::/64 p ra;wan=2001:db8:f::/64 p ra+addr,2001:db8:a00::/56 p pd"
	offered := "v1;eth0=2001:db8:e::/64 p ra;wan=2001:db8:f::/64 p ra+addr,2001:db8:a00::/56 p offer" // the confirmer (confirm.go)
	d := For(parse(pdOnly), Status{}, reports(t, wan, offered), t0)
	if d.Current.String() != "2001:db8:a00::/56" || d.Source != "dhcpv6-pd" || d.Votes[netip.MustParsePrefix("2001:db8:f::/64")] != 0 {
		t.Errorf("PD only: %s source %s votes %v", d, d.Source, d.Votes)
	}
	both := eth0()
	both.Acquisition.DHCPv6PD = &dynamicprefix.DHCPv6PD{Interface: "wan"}
	d = For(parse(both), Status{}, reports(t, wan), t0)
	if got := slices.SortedFunc(maps.Keys(d.Votes), digest.ComparePrefix); !slices.Equal(prefixes(got), []string{"2001:db8:e::/64", "2001:db8:a00::/56"}) {
		t.Errorf("RA on eth0 and PD on wan: votes for %q", got)
	}
}

// DHCPv6-PD with the built-in client: one node runs it. It is a voting node
// whose agent follows the interface; it stays where it is while that node
// votes; spec.dhcpv6pd.nodeNames limits and orders the choice; host mode and
// RA-only DynamicPrefixes name no client.
func TestTheDHCPv6ClientNode(t *testing.T) {
	client := func(names ...string) dynamicprefix.Spec {
		return dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", NodeNames: names}}}
	}
	on := func(node string) Status {
		return Status{DHCPv6PD: &dynamicprefix.DHCPv6PDStatus{ClientNode: node}}
	}
	const (
		follows = "v1;eth0=2001:db8:e::/64 p ra;wan="
		holds   = "v1;wan=2001:db8:a00::/56 p pd"
		noWan   = "v1;eth0=2001:db8:e::/64 p ra"
	)
	for _, c := range []struct {
		name    string
		spec    dynamicprefix.Spec
		prev    Status
		digests []string // nodes a, b, c, ...
		want    string
	}{
		{"the first node by name", client(), Status{}, []string{follows, follows}, "a"},
		{"only nodes whose agent follows the interface", client(), Status{}, []string{noWan, follows}, "b"},
		{"it stays where it runs", client(), on("b"), []string{follows, holds, follows}, "b"},
		{"it moves when its node stops voting", client(), on("z"), []string{follows, follows}, "a"},
		{"nodeNames in order of preference", client("c", "b"), Status{}, []string{follows, follows, follows}, "c"},
		{"nodeNames only", client("c", "b"), on("a"), []string{follows, follows}, "b"},
		{"no candidate, no client", client("x"), on("a"), []string{follows}, ""},
		{"host mode runs none", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan", Mode: dynamicprefix.ModeHost}}},
			Status{}, []string{follows}, ""},
		{"RA only runs none", eth0(), Status{}, []string{follows}, ""},
	} {
		if got := For(parse(c.spec), c.prev, reports(t, c.digests...), t0).PDClient; got != c.want {
			t.Errorf("%s: client on %q, want %q", c.name, got, c.want)
		}
	}
	// A node gone NotReady hands the client over at once, while it still
	// votes: the new client has the prefix back before its report lapses.
	r := reports(t, holds, follows, follows)
	r[0].NotReady = true
	if got := For(parse(client()), on("a"), r, t0).PDClient; got != "b" {
		t.Errorf("a NotReady: client on %q, want b", got)
	}
	r[1].NotReady, r[2].NotReady = true, true
	if got := For(parse(client()), on("a"), r, t0).PDClient; got != "a" {
		t.Errorf("no node Ready: client on %q, want it to stay on a", got)
	}
}

// operatorStatus is a status as the existing operator writes it after two
// renumberings A -> B -> C: no entry for the current prefix (its acquiredAt is
// the PrefixAcquired condition's last transition), draining prefixes oldest
// first, and leaseExpiresAt.
func operatorStatus() Status {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	return Status{
		CurrentPrefix: "2001:db8:c::/64", PrefixSource: "router-advertisement",
		History: []HistoryEntry{
			{Prefix: "2001:db8:a::/64", AcquiredAt: at(0), DeprecatedAt: at(10), State: "draining"},
			{Prefix: "2001:db8:b::/64", AcquiredAt: at(10), DeprecatedAt: at(20), State: "draining"},
		},
		Conditions: []Condition{{Type: PrefixAcquired, True: true, LastTransitionTime: at(20)}},
	}
}

const afterAToBToC = "v1;eth0=2001:db8:a::/64 d600 ra,2001:db8:b::/64 d900 ra,2001:db8:c::/64 p ra"

func TestAdoptingTheExistingOperatorsStatusKeepsItsTimestamps(t *testing.T) {
	prev := operatorStatus()
	d := For(parse(eth0()), prev, reports(t, afterAToBToC), t0.Add(time.Hour))
	if d.Changed || d.Current.String() != "2001:db8:c::/64" {
		t.Fatalf("decision = %s changed=%v", d, d.Changed)
	}
	want := []HistoryEntry{
		{Prefix: "2001:db8:c::/64", AcquiredAt: prev.Conditions[0].LastTransitionTime, State: "active"},
		prev.History[1], prev.History[0], // newest first, as written
	}
	if diff := cmp.Diff(want, d.History); diff != "" {
		t.Errorf("history (-want +got)\n%s", diff)
	}
	if got := fmt.Sprint(d.Pooled); got != "[2001:db8:c::/64 2001:db8:b::/64 2001:db8:a::/64]" {
		t.Errorf("pooled %s", got)
	}
	// And it is a fixed point: the next pass renders the same history.
	again := For(parse(eth0()), status(d), reports(t, afterAToBToC), t0.Add(2*time.Hour))
	if diff := cmp.Diff(d.History, again.History); diff != "" {
		t.Errorf("second pass (-first +second)\n%s", diff)
	}
}

func TestAdoptedHistoryDropsTheOldestByCount(t *testing.T) {
	s := eth0()
	s.Transition = &dynamicprefix.Transition{MaxPrefixHistory: 2}
	onD := "v1;eth0=2001:db8:a::/64 d600 ra,2001:db8:b::/64 d900 ra,2001:db8:c::/64 d900 ra,2001:db8:d::/64 p ra"
	d := For(parse(s), operatorStatus(), reports(t, onD), t0.Add(time.Hour))
	got := []string{}
	for _, h := range d.History {
		got = append(got, h.Prefix+" "+h.State)
	}
	// A, the oldest, goes; B (newer) stays although the operator listed it second.
	want := []string{"2001:db8:d::/64 active", "2001:db8:c::/64 draining", "2001:db8:b::/64 draining"}
	if !slices.Equal(got, want) {
		t.Errorf("history = %v, want %v", got, want)
	}
}

func TestManagedNamesEveryPrefixThePreviousStatusDid(t *testing.T) {
	d := For(parse(eth0()), operatorStatus(), reports(t, "v1;eth0=2001:db8:c::/64 p ra"), t0.Add(time.Hour))
	// A and B are no longer reported: expired, out of the pools, yet an
	// object without a record still has its entries for them claimed.
	if got := fmt.Sprint(d.Pooled); got != "[2001:db8:c::/64]" {
		t.Errorf("pooled %s", got)
	}
	if got := fmt.Sprint(d.Managed); got != "[2001:db8:c::/64 2001:db8:a::/64 2001:db8:b::/64]" {
		t.Errorf("managed %s", got)
	}
}
