package render

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/model"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)

func decided(t *testing.T, dp *api.DynamicPrefix, d string, now time.Time) decide.Decision {
	n, err := digest.Decode(d)
	if err != nil {
		t.Fatal(err)
	}
	return decide.For(model.Parse(dp.Name, dp.Spec), Prior(dp.Status), []decide.Report{{Node: "a", Digest: n}}, now)
}

// roundTrip stores and reads a status the way the API server does.
func roundTrip(t *testing.T, s api.Status) api.Status {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out api.Status
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderIsStableAcrossPasses(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{
		Acquisition:   dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}},
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::f000:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "s", Offset: 2, PrefixLength: 80}},
	}}
	dp.Generation = 3
	st := Status(dp, model.Parse(dp.Name, dp.Spec), decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0), Problems{}, t0)
	if st.CurrentPrefix != "2001:db8:a::/64" || len(st.AddressRanges) != 1 || st.AddressRanges[0].CIDR != "2001:db8:a:0:f000::/68" ||
		st.Subnets[0].CIDR != "2001:db8:a:0:2::/80" {
		t.Fatalf("status = %+v", st)
	}
	dp.Status = roundTrip(t, st)
	again := Status(dp, model.Parse(dp.Name, dp.Spec), decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0.Add(time.Hour)), Problems{}, t0.Add(time.Hour))
	if !StatusEqual(again, dp.Status) {
		a, _ := json.Marshal(again)
		b, _ := json.Marshal(dp.Status)
		t.Errorf("status changed an hour later with nothing new:\n%s\n%s", a, b)
	}
}

func TestProblemsAreConditions(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}}}}
	st := Status(dp, model.Parse(dp.Name, dp.Spec), decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0), Problems{Pools: errors.New("pool lb: no address range \"x\"")}, t0)
	var degraded, synced string
	for _, c := range st.Conditions {
		switch c.Type {
		case Degraded:
			degraded = string(c.Status) + " " + c.Reason
		case PoolsSynced:
			synced = string(c.Status) + " " + c.Reason
		}
	}
	if degraded != "True PoolError" || synced != "False PoolError" {
		t.Errorf("Degraded=%q PoolsSynced=%q", degraded, synced)
	}
}

func TestReadySumsTheConditionsUp(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{}}}}
	ready := func(st api.Status) string {
		c := meta.FindStatusCondition(st.Conditions, Ready)
		if c == nil {
			return "absent"
		}
		return string(c.Status) + " " + c.Reason
	}
	m := model.Parse(dp.Name, dp.Spec)
	if got := ready(Status(dp, m, decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0), Problems{}, t0)); got != "True Ready" {
		t.Errorf("all well: Ready %s", got)
	}
	if got := ready(Status(dp, m, decided(t, dp, "v1;eth0=2001:db8:a::/64 p ra", t0), Problems{Pools: errors.New("pool lb: conflict")}, t0)); got != "False PoolError" {
		t.Errorf("a pool in error: Ready %s", got)
	}
	if got := ready(Status(dp, m, decide.Decision{}, Problems{}, t0)); got != "False NotReady" {
		t.Errorf("no prefix yet: Ready %s", got)
	}
}

// A status names its current prefix and the history entries that have not
// expired; a decision pooling anything else needs the status written first.
func TestNamesNewPrefix(t *testing.T) {
	a, b := netip.MustParsePrefix("2001:db8:a::/64"), netip.MustParsePrefix("2001:db8:b::/64")
	st := api.Status{CurrentPrefix: a.String(), History: []api.HistoryEntry{
		{Prefix: a.String(), State: model.StateActive}, {Prefix: b.String(), State: model.StateExpired}}}
	for _, c := range []struct {
		name   string
		st     api.Status
		pooled []netip.Prefix
		want   bool
	}{
		{"the current prefix", st, []netip.Prefix{a}, false},
		{"an expired one back", st, []netip.Prefix{b, a}, true},
		{"nothing yet", api.Status{}, []netip.Prefix{a}, true},
		{"a drain ending", api.Status{CurrentPrefix: b.String(), History: []api.HistoryEntry{
			{Prefix: b.String(), State: model.StateActive}, {Prefix: a.String(), State: model.StateDraining}}}, []netip.Prefix{b}, false},
	} {
		if got := NamesNewPrefix(c.st, model.Model{}, decide.Decision{Pooled: c.pooled}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// With delegatedPrefixLength the status names each prefix's delegation too
// (subnets are carved from it); one it does not name yet - the length was
// just set, or a draining entry was written before - needs the status first.
func TestAStatusNamesTheDelegationOfEachPrefix(t *testing.T) {
	m := model.Parse("home", dynamicprefix.Spec{
		Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: new(56)}},
		Subnets:     []dynamicprefix.Subnet{{Name: "third", Offset: 3, PrefixLength: 64}},
	})
	a, b := netip.MustParsePrefix("2001:db8:0:12::/64"), netip.MustParsePrefix("2001:db8:7:12::/64")
	d := decide.Decision{Current: b, Pooled: []netip.Prefix{b, a}, History: []decide.HistoryEntry{
		{Prefix: b.String(), State: model.StateActive}, {Prefix: a.String(), State: model.StateDraining}}}
	decided := slices.Clone(d.History)
	st := Status(&api.DynamicPrefix{}, m, d, Problems{}, t0)
	if st.DelegatedPrefix != "2001:db8:7::/56" {
		t.Errorf("delegatedPrefix %q", st.DelegatedPrefix)
	}
	var got []string
	for _, h := range st.History {
		got = append(got, h.Prefix+" in "+h.DelegatedPrefix)
	}
	if want := []string{"2001:db8:7:12::/64 in 2001:db8:7::/56", "2001:db8:0:12::/64 in 2001:db8::/56"}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
	if len(st.Subnets) != 1 || st.Subnets[0].CIDR != "2001:db8:7:3::/64" {
		t.Errorf("subnets %v", st.Subnets)
	}
	if !slices.Equal(d.History, decided) {
		t.Error("the decision's history was written to")
	}
	if NamesNewPrefix(st, m, d) {
		t.Error("a status naming every delegation asks to be written first")
	}
	older := st
	older.History = slices.Clone(st.History)
	older.History[1].DelegatedPrefix = ""
	if !NamesNewPrefix(older, m, d) {
		t.Error("a draining prefix whose delegation the status does not name is written without the status first")
	}
	if NamesNewPrefix(older, model.Model{}, d) {
		t.Error("without delegatedPrefixLength, delegations matter")
	}

	// A prefix no longer than the delegation is its own: the status names no
	// delegation for it (its admission policy admits only the spec's length).
	short := decide.Decision{Current: netip.MustParsePrefix("2001:db8:100::/48"), Pooled: []netip.Prefix{netip.MustParsePrefix("2001:db8:100::/48")},
		History: []decide.HistoryEntry{{Prefix: "2001:db8:100::/48", State: model.StateActive}}}
	if st := Status(&api.DynamicPrefix{}, m, short, Problems{}, t0); st.DelegatedPrefix != "" || st.History[0].DelegatedPrefix != "" || st.Subnets[0].CIDR != "2001:db8:100:3::/64" {
		t.Errorf("a /48 under delegatedPrefixLength 56: delegation %q, history %+v, subnets %v", st.DelegatedPrefix, st.History, st.Subnets)
	} else if NamesNewPrefix(st, m, short) {
		t.Error("a status naming a /48 and no delegation asks to be written first")
	}
}

// A delegation outside allowedPrefixes is not named (renumber-writer-status
// refuses it): the user narrowed them to the current prefix's delegation
// while 2001:db8:2::/64 drains, or to the current prefix alone.
func TestAStatusNamesNoDelegationOutsideAllowedPrefixes(t *testing.T) {
	cur, old := netip.MustParsePrefix("2001:db8:1::/64"), netip.MustParsePrefix("2001:db8:2::/64")
	d := decide.Decision{Current: cur, Pooled: []netip.Prefix{cur, old}, History: []decide.HistoryEntry{
		{Prefix: cur.String(), State: model.StateActive}, {Prefix: old.String(), State: model.StateDraining}}}
	for _, c := range []struct {
		allowed []string
		want    []string // the current prefix's delegation, then each entry's
	}{
		{nil, []string{"2001:db8:1::/56", "2001:db8:1::/56", "2001:db8:2::/56"}},
		{[]string{"2001:db8:1::/56"}, []string{"2001:db8:1::/56", "2001:db8:1::/56", ""}},
		{[]string{"2001:db8:1::/64", "2001:db8:2::/64"}, []string{"", "", ""}},
	} {
		m := model.Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{
			RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: new(56)},
			PrefixFilter:        &dynamicprefix.PrefixFilter{AllowedPrefixes: c.allowed}}})
		st := Status(&api.DynamicPrefix{}, m, d, Problems{}, t0)
		got := []string{st.DelegatedPrefix}
		for _, h := range st.History {
			got = append(got, h.DelegatedPrefix)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("allowedPrefixes %v: delegations (-want +got):\n%s", c.allowed, diff)
		}
	}
}

// A DynamicPrefix whose interface another one's client took (first by
// name) says so: DelegationConfirmed False and Degraded True, naming it.
func TestATakenInterfaceIsDegradedNamingTheOther(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}}
	dp.Name = "lab"
	m := model.Parse(dp.Name, dp.Spec)
	m.PDTakenBy = "home"
	st := Status(dp, m, decide.Decision{}, Problems{}, t0)
	for _, typ := range []string{DelegationConfirmed, Degraded} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.Reason != ReasonInterfaceTaken || !strings.Contains(c.Message, "DynamicPrefix home (first by name)") {
			t.Errorf("%s: %+v, want reason %s naming home", typ, c, ReasonInterfaceTaken)
		}
	}
}

// A two-node stall past the server's lifetime is Degraded, saying what only
// the user can do, and a later pass with nothing new writes nothing.
func TestATwoNodeStallIsDegradedOnce(t *testing.T) {
	dp := &api.DynamicPrefix{Spec: dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{DHCPv6PD: &dynamicprefix.DHCPv6PD{Interface: "wan"}}}}
	m := model.Parse(dp.Name, dp.Spec)
	a, b := netip.MustParsePrefix("2001:db8:a00::/56"), netip.MustParsePrefix("2001:db8:b00::/56")
	d := decide.Decision{Current: a, PDClient: "a", PDStalled: true,
		Confirm: decide.Confirmation{Confirmer: "b", Held: []netip.Prefix{a}, Offered: []netip.Prefix{b}, Since: t0, Alone: true}}
	st := Status(dp, m, d, Problems{}, t0.Add(10*time.Minute))
	c := meta.FindStatusCondition(st.Conditions, Degraded)
	if c == nil || c.Status != "True" || c.Reason != ReasonStalled || !strings.Contains(c.Message, "spec.acquisition.dhcpv6pd.nodeNames") {
		t.Fatalf("Degraded %+v, want True %s naming nodeNames", c, ReasonStalled)
	}
	dp.Status = st
	if again := Status(dp, m, d, Problems{}, t0.Add(time.Hour)); !StatusEqual(again, st) {
		t.Errorf("an hour later, nothing new, the status changed:\n%+v\n%+v", st, again)
	}
}
