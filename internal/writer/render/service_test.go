package render

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
)

var (
	prefixOld = netip.MustParsePrefix("2001:db8:a::/64")
	specS     = model.Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::ffff:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 1, PrefixLength: 112}},
	})
)

func TestAddress(t *testing.T) {
	tests := []struct {
		name string
		f    holdings.ServiceFollow
		want string
	}{
		{"suffix on the prefix", holdings.ServiceFollow{Suffix: "::ffff:0:1"}, "2001:db8:b::ffff:0:1"},
		{"suffix inside the address range", holdings.ServiceFollow{Suffix: "::ffff:0:0:7", Range: "lb"}, "2001:db8:b:0:ffff::7"},
		{"suffix on the subnet", holdings.ServiceFollow{Suffix: "::9", Subnet: "svc"}, "2001:db8:b::1:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServiceAddress(specS, tt.f, cur)
			if err != nil || got.String() != tt.want {
				t.Errorf("ServiceAddress = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	for _, f := range []holdings.ServiceFollow{{}, {Suffix: "nope"}, {Suffix: "::1", Range: "lb"}, {Suffix: "::1", Subnet: "x"}, {Suffix: "::1:0:0", Subnet: "svc"}} {
		if _, err := ServiceAddress(specS, f, cur); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("ServiceAddress(%+v) err = %v, want ErrSpec", f, err)
		}
	}
}

func TestRenderHA(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	// Written before keys could be chosen: the alpha key, no keys record.
	live := holdings.Live(map[string]string{
		holdings.AnnotationIPs: "192.0.2.7,2001:db8:a::ffff:0:1", holdings.AnnotationManagedIPs: "2001:db8:a::ffff:0:1",
		holdings.AnnotationTargetAlpha: "lb.example.org,2001:db8:a::ffff:0:1", holdings.AnnotationManagedTarget: "2001:db8:a::ffff:0:1",
	}, holdings.DefaultTargetKeys)
	got, err := Service(specS, f, []netip.Prefix{cur, prefixOld}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.7", "2001:db8:b::ffff:0:1", "2001:db8:a::ffff:0:1"}; !slices.Equal(got.IPs[holdings.AnnotationIPs], want) {
		t.Errorf("ips = %q, want user entry + current + retained %q", got.IPs[holdings.AnnotationIPs], want)
	}
	if want := []string{"lb.example.org", "2001:db8:b::ffff:0:1"}; !slices.Equal(got.Targets[holdings.AnnotationTargetAlpha], want) {
		t.Errorf("alpha targets = %q, want user hostname + current only %q", got.Targets[holdings.AnnotationTargetAlpha], want)
	}
	if want := []string{"2001:db8:b::ffff:0:1"}; !slices.Equal(got.Targets[holdings.AnnotationTarget], want) {
		t.Errorf("v0.22 targets = %q, want the current address %q", got.Targets[holdings.AnnotationTarget], want)
	}
	if !slices.Equal(got.TargetKeys, holdings.DefaultTargetKeys) || !slices.Equal(got.ManagedTargets, []string{"2001:db8:b::ffff:0:1"}) {
		t.Errorf("records: keys %q targets %q", got.TargetKeys, got.ManagedTargets)
	}
	again, _ := Service(specS, f, []netip.Prefix{cur, prefixOld}, got, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if !again.Equal(got) {
		t.Errorf("rendering twice changes the Service:\n%+v\n%+v", got, again)
	}
	skip := f
	skip.SkipDNS = true
	got, _ = Service(specS, skip, []netip.Prefix{cur}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if !slices.Equal(got.Targets[holdings.AnnotationTargetAlpha], []string{"lb.example.org"}) || len(got.Targets[holdings.AnnotationTarget]) != 0 ||
		len(got.ManagedTargets) != 0 || len(got.TargetKeys) != 0 {
		t.Errorf("skip-external-dns-update: %+v", got)
	}
}

// A key dropped from the list is released (the user's entries under it stay);
// a key added gets the target; the record follows the list.
func TestTargetKeysFollowTheList(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	both, _ := Service(specS, f, []netip.Prefix{cur}, holdings.Live(map[string]string{holdings.AnnotationTargetAlpha: "lb.example.org"}, holdings.DefaultTargetKeys), Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	ann := map[string]string{}
	for k, v := range both.Patch(holdings.Annotations{}) {
		if v != nil {
			ann[k] = v.(string)
		}
	}
	newOnly := []string{holdings.AnnotationTarget}
	live := holdings.Live(ann, newOnly)
	if !slices.Equal(live.Targets[holdings.AnnotationTargetAlpha], []string{"lb.example.org", "2001:db8:b::ffff:0:1"}) {
		t.Fatalf("the record's keys are read even when not asked for: %+v", live)
	}
	got, _ := Service(specS, f, []netip.Prefix{cur}, live, Served{}, ServiceOptions{TargetKeys: newOnly})
	if !slices.Equal(got.Targets[holdings.AnnotationTargetAlpha], []string{"lb.example.org"}) {
		t.Errorf("alpha after being dropped: %q, want the user's entry only", got.Targets[holdings.AnnotationTargetAlpha])
	}
	if !slices.Equal(got.TargetKeys, newOnly) || !slices.Equal(got.Targets[holdings.AnnotationTarget], []string{"2001:db8:b::ffff:0:1"}) {
		t.Errorf("after: %+v", got)
	}
	patch := got.Patch(live)
	if patch[holdings.AnnotationTargetAlpha] != "lb.example.org" || patch[holdings.AnnotationManagedTargetKeys] != holdings.AnnotationTarget {
		t.Errorf("patch %v", patch)
	}
	// No key at all: every target of ours goes, the records too.
	none, _ := Service(specS, f, []netip.Prefix{cur}, holdings.Live(ann, nil), Served{}, ServiceOptions{})
	if len(none.Targets[holdings.AnnotationTarget]) != 0 || none.Targets[holdings.AnnotationTargetAlpha][0] != "lb.example.org" || none.TargetKeys != nil || none.ManagedTargets != nil {
		t.Errorf("no keys: %+v", none)
	}
}

// An entry the user lists under one key is the user's under every key: it is
// never removed, at the price of not being claimed under the others.
func TestATargetTheUserListsIsNeverClaimed(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	live := holdings.Live(map[string]string{holdings.AnnotationTarget: "2001:db8:b::ffff:0:1"}, holdings.DefaultTargetKeys)
	got, _ := Service(specS, f, []netip.Prefix{cur}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if len(got.ManagedTargets) != 0 {
		t.Errorf("record %q claims an entry the user wrote", got.ManagedTargets)
	}
	later, _ := Service(specS, f, []netip.Prefix{prefixOld}, got, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if !slices.Contains(later.Targets[holdings.AnnotationTarget], "2001:db8:b::ffff:0:1") {
		t.Errorf("the user's entry was removed: %q", later.Targets[holdings.AnnotationTarget])
	}
}

// DNS follows the address: while the load balancer has not published the new
// address, the target stays on the previous one (still allocated, still
// answering); it moves once the new one is published, and at once where
// waiting would not help.
func TestTheTargetWaitsForTheLoadBalancer(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	live := holdings.Live(map[string]string{
		holdings.AnnotationIPs: "192.0.2.7," + was, holdings.AnnotationManagedIPs: was,
		holdings.AnnotationTarget: was, holdings.AnnotationManagedTarget: was, holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget,
	}, []string{holdings.AnnotationTarget})
	render := func(pooled []netip.Prefix, ingress ...string) holdings.Annotations {
		t.Helper()
		got, err := Service(specS, f, pooled, live, Served{Ingress: ingress}, ServiceOptions{TargetKeys: []string{holdings.AnnotationTarget}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	held := render([]netip.Prefix{cur, prefixOld}, "192.0.2.7", was)
	if !slices.Equal(held.IPs[holdings.AnnotationIPs], []string{"192.0.2.7", now, was}) {
		t.Errorf("ips = %q: the new address must be asked for at once", held.IPs[holdings.AnnotationIPs])
	}
	if !slices.Equal(held.Targets[holdings.AnnotationTarget], []string{was}) || !slices.Equal(held.ManagedTargets, []string{was}) {
		t.Errorf("not yet published: target %q record %q, want both still %s", held.Targets[holdings.AnnotationTarget], held.ManagedTargets, was)
	}
	moves := []struct {
		why     string
		pooled  []netip.Prefix
		ingress []string
	}{
		{"published", []netip.Prefix{cur, prefixOld}, []string{"192.0.2.7", now, was}},
		{"no ingress at all", []netip.Prefix{cur, prefixOld}, nil},
		{"the previous address not published either", []netip.Prefix{cur, prefixOld}, []string{"192.0.2.7"}},
		{"the previous address no longer pooled", []netip.Prefix{cur}, []string{"192.0.2.7", was}},
	}
	for _, m := range moves {
		got := render(m.pooled, m.ingress...)
		if !slices.Equal(got.Targets[holdings.AnnotationTarget], []string{now}) || !slices.Equal(got.ManagedTargets, []string{now}) {
			t.Errorf("%s: target %q record %q, want %s", m.why, got.Targets[holdings.AnnotationTarget], got.ManagedTargets, now)
		}
	}
}

// On a Cilium whose L2 announcer misses added addresses, a Service is touched
// once when its load balancer publishes an address of ours the last nudge did
// not cover - in the same write that moves the target when there is one - and
// never when an address goes away. The Service's own annotations override.
func TestTheL2Nudge(t *testing.T) {
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	ann := map[string]string{
		holdings.AnnotationIPs: was, holdings.AnnotationManagedIPs: was, holdings.AnnotationL2Nudged: was,
		holdings.AnnotationTarget: was, holdings.AnnotationManagedTarget: was, holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget,
	}
	old := ServiceOptions{TargetKeys: []string{holdings.AnnotationTarget}, L2Nudge: true}
	render := func(f holdings.ServiceFollow, o ServiceOptions, live holdings.Annotations, pooled []netip.Prefix, ingress ...string) holdings.Annotations {
		t.Helper()
		f.Suffix = "::ffff:0:1"
		got, err := Service(specS, f, pooled, live, Served{Ingress: ingress}, o)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	both := []netip.Prefix{cur, prefixOld}
	asked := render(holdings.ServiceFollow{}, old, holdings.Live(ann, old.TargetKeys), both, was)
	if !slices.Equal(asked.L2Nudged, []string{was}) {
		t.Errorf("before the new address is published: nudge %q, want the last one %q", asked.L2Nudged, was)
	}
	moved := render(holdings.ServiceFollow{}, old, asked, both, now, was)
	if !slices.Equal(moved.L2Nudged, []string{now, was}) || !slices.Equal(moved.ManagedTargets, []string{now}) {
		t.Errorf("published: nudge %q target %q, want the nudge %q and the target moved in one rendering", moved.L2Nudged, moved.ManagedTargets, []string{now, was})
	}
	if again := render(holdings.ServiceFollow{}, old, moved, both, now, was); !again.Equal(moved) {
		t.Errorf("a second look nudges again: %+v", again)
	}
	drained := render(holdings.ServiceFollow{}, old, moved, []netip.Prefix{cur}, now)
	if !slices.Equal(drained.L2Nudged, []string{now, was}) {
		t.Errorf("a drain ending changed the nudge to %q: an address going away needs none", drained.L2Nudged)
	}
	fixed := ServiceOptions{TargetKeys: old.TargetKeys}
	for _, c := range []struct {
		why  string
		f    holdings.ServiceFollow
		o    ServiceOptions
		want []string
	}{
		{"a fixed Cilium", holdings.ServiceFollow{}, fixed, []string{was}},
		{"skip-l2-nudge", holdings.ServiceFollow{SkipL2Nudge: true}, old, []string{was}},
		{"force-l2-nudge on a fixed Cilium", holdings.ServiceFollow{ForceL2Nudge: true}, fixed, []string{now, was}},
	} {
		if got := render(c.f, c.o, asked, both, now, was); !slices.Equal(got.L2Nudged, c.want) {
			t.Errorf("%s: nudge %q, want %q", c.why, got.L2Nudged, c.want)
		}
	}
	if r := ReleaseService(moved); r.L2Nudged != nil || r.Patch(moved)[holdings.AnnotationL2Nudged] != nil {
		t.Errorf("release keeps the nudge: %+v", r)
	}
}

// Switching a Service's load balancer moves our addresses to the key the new
// one reads; the user's entries stay under every key, and a Service that
// stays on Cilium carries no record of the key.
func TestSwitchingProviderMovesOurAddresses(t *testing.T) {
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	live := holdings.Live(map[string]string{
		holdings.AnnotationIPs: "192.0.2.7," + was, holdings.AnnotationManagedIPs: was, holdings.AnnotationKubeVIPIPs: "192.0.2.8",
	}, nil)
	opt := ServiceOptions{L2Nudge: true}
	kv := holdings.ServiceFollow{Suffix: "::ffff:0:1", Provider: "kube-vip"}
	got, err := Service(specS, kv, []netip.Prefix{cur}, live, Served{Ingress: []string{now}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IPs[holdings.AnnotationIPs], []string{"192.0.2.7"}) || !slices.Equal(got.IPs[holdings.AnnotationKubeVIPIPs], []string{"192.0.2.8", now}) ||
		!slices.Equal(got.ManagedIPs, []string{now}) || got.IPsKey != holdings.AnnotationKubeVIPIPs {
		t.Errorf("to kube-vip: %+v", got)
	}
	if got.L2Nudged != nil {
		t.Errorf("a kube-vip Service got Cilium's L2 nudge: %q", got.L2Nudged)
	}
	patch := got.Patch(live)
	if patch[holdings.AnnotationIPs] != "192.0.2.7" || patch[holdings.AnnotationKubeVIPIPs] != "192.0.2.8,"+now || patch[holdings.AnnotationManagedIPsKey] != holdings.AnnotationKubeVIPIPs {
		t.Errorf("patch %v", patch)
	}
	back, _ := Service(specS, holdings.ServiceFollow{Suffix: "::ffff:0:1", Provider: "cilium"}, []netip.Prefix{cur}, got, Served{}, ServiceOptions{})
	if !slices.Equal(back.IPs[holdings.AnnotationIPs], []string{"192.0.2.7", now}) || !slices.Equal(back.IPs[holdings.AnnotationKubeVIPIPs], []string{"192.0.2.8"}) ||
		back.IPsKey != "" || back.Patch(got)[holdings.AnnotationManagedIPsKey] != nil {
		t.Errorf("back to cilium: %+v", back)
	}
	if _, err := Service(specS, holdings.ServiceFollow{Suffix: "::1", Provider: "metallb"}, []netip.Prefix{cur}, live, Served{}, opt); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("unknown provider: err = %v", err)
	}
	if r := ReleaseService(got); !slices.Equal(r.IPs[holdings.AnnotationKubeVIPIPs], []string{"192.0.2.8"}) || r.IPsKey != "" || r.Owned() {
		t.Errorf("release from kube-vip: %+v", r)
	}
}

func TestReleaseKeepsUserEntries(t *testing.T) {
	live := holdings.Live(map[string]string{
		holdings.AnnotationIPs: "192.0.2.7,2001:db8:b::1", holdings.AnnotationManagedIPs: "2001:db8:b::1",
		holdings.AnnotationTarget: "lb.example.org,2001:db8:b::1", holdings.AnnotationTargetAlpha: "2001:db8:b::1",
		holdings.AnnotationManagedTarget: "2001:db8:b::1", holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget + "," + holdings.AnnotationTargetAlpha,
	}, nil)
	got := ReleaseService(live)
	if !slices.Equal(got.IPs[holdings.AnnotationIPs], []string{"192.0.2.7"}) || got.ManagedIPs != nil || got.ManagedTargets != nil || got.TargetKeys != nil ||
		!slices.Equal(got.Targets[holdings.AnnotationTarget], []string{"lb.example.org"}) || len(got.Targets[holdings.AnnotationTargetAlpha]) != 0 {
		t.Errorf("release = %+v", got)
	}
	if p := got.Patch(live); p[holdings.AnnotationTargetAlpha] != nil || p[holdings.AnnotationTarget] != "lb.example.org" {
		t.Errorf("release patch %v", p)
	}
}

// A Service the existing operator wrote (alpha key, its records, draining
// prefixes oldest first) already holds the right entries: with the key list
// it wrote (the alpha key alone, before its v0.0.18) the writer leaves it
// alone; with both keys it adds the GA key, one write.
func TestTheExistingOperatorsServiceNeedsNoWriteUnderItsKeys(t *testing.T) {
	older := netip.MustParsePrefix("2001:db8:9::/64")
	pooled := []netip.Prefix{cur, prefixOld, older}
	ann := map[string]string{
		holdings.AnnotationIPs:         "192.0.2.7,2001:db8:b::ffff:0:1,2001:db8:9::ffff:0:1,2001:db8:a::ffff:0:1",
		holdings.AnnotationManagedIPs:  "2001:db8:b::ffff:0:1,2001:db8:9::ffff:0:1,2001:db8:a::ffff:0:1",
		holdings.AnnotationTargetAlpha: "lb.example.org,2001:db8:b::ffff:0:1", holdings.AnnotationManagedTarget: "2001:db8:b::ffff:0:1",
	}
	alpha := []string{holdings.AnnotationTargetAlpha}
	live := holdings.Live(ann, alpha)
	want, err := Service(specS, holdings.ServiceFollow{Suffix: "::ffff:0:1"}, pooled, live, Served{}, ServiceOptions{TargetKeys: alpha})
	if err != nil {
		t.Fatal(err)
	}
	if !want.Equal(live) {
		t.Errorf("under the alpha key alone: a write, patch %v", want.Patch(live))
	}
	live = holdings.Live(ann, holdings.DefaultTargetKeys)
	want, _ = Service(specS, holdings.ServiceFollow{Suffix: "::ffff:0:1"}, pooled, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if want.Equal(live) || want.Patch(live)[holdings.AnnotationTarget] != "2001:db8:b::ffff:0:1" {
		t.Errorf("under both keys: want one write adding %s, patch %v", holdings.AnnotationTarget, want.Patch(live))
	}
}

func TestAnAddressThatBecomesCurrentAgainMovesToTheFront(t *testing.T) {
	// a was current, then b; now a is current again.
	live := holdings.Live(map[string]string{
		holdings.AnnotationIPs:        "192.0.2.7,2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1",
		holdings.AnnotationManagedIPs: "2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1", holdings.AnnotationSkipDNS: "true",
	}, holdings.DefaultTargetKeys)
	want, err := Service(specS, holdings.ServiceFollow{Suffix: "::ffff:0:1", SkipDNS: true}, []netip.Prefix{prefixOld, cur}, live, Served{}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if want.Equal(live) {
		t.Fatal("the same set in the old order: no write, so the reactivated address stays behind")
	}
	if got := want.Patch(live)[holdings.AnnotationIPs]; got != "192.0.2.7,2001:db8:a::ffff:0:1,2001:db8:b::ffff:0:1" {
		t.Errorf("ips patch = %v", got)
	}
}

// A Service whose address is a ULA its router maps onto the followed prefix
// (nptv6): the DNS target is the mapped address of what the load balancer
// publishes inside the mapping prefix; the Service's addresses are never
// written; the user's IPv4 target stays beside ours.
func TestAMappedTargetFollowsThePrefixNotTheAddress(t *testing.T) {
	m := model.Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{
		RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr.To(48)}}})
	f := holdings.ServiceFollowOf(map[string]string{dynamicprefix.AnnotationName: "home",
		holdings.AnnotationMapping: model.MappingNPTv6, holdings.AnnotationMappingPrefix: "fd01:203:405::/48"})
	a, b := netip.MustParsePrefix("2001:db8:1:100::/64"), netip.MustParsePrefix("2001:db8:2:200::/64")
	opt := ServiceOptions{TargetKeys: holdings.DefaultTargetKeys}
	ula := "fd01:203:405:1::1234"
	live := holdings.Live(map[string]string{holdings.AnnotationIPs: ula, holdings.AnnotationTarget: "192.0.2.10", holdings.AnnotationTargetAlpha: "192.0.2.10"}, holdings.DefaultTargetKeys)

	// Nothing published yet: no target of ours.
	got, err := Service(m, f, []netip.Prefix{a}, live, Served{}, opt)
	if err != nil || len(got.ManagedTargets) != 0 || !got.Equal(live) {
		t.Fatalf("before the load balancer publishes: %+v, %v", got, err)
	}
	// Published: RFC 6296's example, on the /48 the advertised /64 is part of.
	got, err = Service(m, f, []netip.Prefix{a}, live, Served{Ingress: []string{ula, "192.0.2.99"}}, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.10", "2001:db8:1:d550::1234"}
	for _, k := range holdings.DefaultTargetKeys {
		if !slices.Equal(got.Targets[k], want) {
			t.Errorf("%s = %q, want %q", k, got.Targets[k], want)
		}
	}
	if !slices.Equal(got.IPs[holdings.AnnotationIPs], []string{ula}) || len(got.ManagedIPs) != 0 {
		t.Errorf("the Service's address was touched: %v, managed %v", got.IPs, got.ManagedIPs)
	}
	// The ISP renumbers: the target moves to B's mapping; A's is gone at once
	// (the router maps only the current prefix).
	live = got
	got, _ = Service(m, f, []netip.Prefix{b, a}, live, Served{Ingress: []string{ula}}, opt)
	if want := []string{"192.0.2.10", "2001:db8:2:d54f::1234"}; !slices.Equal(got.Targets[holdings.AnnotationTarget], want) {
		t.Errorf("after renumbering: %q, want %q", got.Targets[holdings.AnnotationTarget], want)
	}
	// The load balancer restarts and publishes nothing for a while: the
	// target stays.
	live = got
	if again, _ := Service(m, f, []netip.Prefix{b, a}, live, Served{}, opt); !again.Equal(live) {
		t.Errorf("with nothing published the target moved: %v", again.Targets)
	}
}

func TestAMappingThatCannotBeUsedIsInvalid(t *testing.T) {
	a := []netip.Prefix{netip.MustParsePrefix("2001:db8:1:100::/64")}
	for _, ann := range []map[string]string{
		{holdings.AnnotationMapping: "nat66", holdings.AnnotationMappingPrefix: "fd01::/64"},
		{holdings.AnnotationMapping: model.MappingNPTv6, holdings.AnnotationMappingPrefix: "fd01::"},
		{holdings.AnnotationMapping: model.MappingNPTv6, holdings.AnnotationMappingPrefix: "10.0.0.0/8"},
		{holdings.AnnotationMapping: model.MappingNPTv6, holdings.AnnotationMappingPrefix: "fd01::/48"}, // the followed prefix is a /64, no delegation
	} {
		if _, err := Service(specS, holdings.ServiceFollowOf(ann), a, holdings.Annotations{}, Served{Ingress: []string{"fd01::1"}}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys}); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", ann, err)
		}
	}
}

// A Service that held addresses of ours (mode ha) and now asks for a mapped
// target: our addresses go, the user's stay, and the record stays, empty
// (owning nothing; absent, the existing operator's rule would own again).
func TestAMappedServiceReleasesTheAddressesItHeld(t *testing.T) {
	live := holdings.Live(map[string]string{holdings.AnnotationIPs: "2001:db8:1:100::1,fd01::1", holdings.AnnotationManagedIPs: "2001:db8:1:100::1"}, holdings.DefaultTargetKeys)
	f := holdings.ServiceFollowOf(map[string]string{holdings.AnnotationMapping: model.MappingNetmap, holdings.AnnotationMappingPrefix: "fd01::/64"})
	got, err := Service(specS, f, []netip.Prefix{netip.MustParsePrefix("2001:db8:1:100::/64")}, live, Served{Ingress: []string{"fd01::1"}}, ServiceOptions{TargetKeys: holdings.DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IPs[holdings.AnnotationIPs], []string{"fd01::1"}) || len(got.ManagedIPs) > 0 || !got.IPsRecorded {
		t.Errorf("addresses %v (record %q, recorded %v), want the user's alone and the record kept, empty", got.IPs, got.ManagedIPs, got.IPsRecorded)
	}
	if want := []string{"2001:db8:1:100::1"}; !slices.Equal(got.Targets[holdings.AnnotationTarget], want) {
		t.Errorf("target %q, want %q", got.Targets[holdings.AnnotationTarget], want)
	}
}

// A withheld address (the claims': on a draining prefix, published for
// another) is neither asked for nor recorded - one written before is taken
// out as ours - while the DNS target stays on the current address and the
// user's entries stay, the withheld address among them.
func TestAWithheldAddressIsNotAskedFor(t *testing.T) {
	f := holdings.ServiceFollow{Suffix: "::ffff:0:1"}
	for _, tc := range []struct {
		name, ips, record string
		want              []string
	}{
		{"never written", "192.0.2.7", "", []string{"192.0.2.7", "2001:db8:b::ffff:0:1"}},
		{"written before, ours", "192.0.2.7,2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1", []string{"192.0.2.7", "2001:db8:b::ffff:0:1"}},
		{"the user's own entry", "2001:db8:a::ffff:0:1", "", []string{"2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{holdings.AnnotationIPs: tc.ips}
			if tc.record != "" {
				ann[holdings.AnnotationManagedIPs] = tc.record
			}
			live := holdings.Live(ann, holdings.DefaultTargetKeys)
			got, err := Service(specS, f, []netip.Prefix{cur, prefixOld}, live, Served{},
				ServiceOptions{TargetKeys: holdings.DefaultTargetKeys, Withheld: []string{"2001:db8:a::ffff:0:1"}})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IPs[holdings.AnnotationIPs], tc.want) || !slices.Equal(got.ManagedIPs, []string{"2001:db8:b::ffff:0:1"}) {
				t.Errorf("ips %q record %q, want %q and the current address alone recorded", got.IPs[holdings.AnnotationIPs], got.ManagedIPs, tc.want)
			}
			if got := got.Targets[holdings.DefaultTargetKeys[0]]; !slices.Equal(got, []string{"2001:db8:b::ffff:0:1"}) {
				t.Errorf("target %q, want the current address", got)
			}
		})
	}
}
