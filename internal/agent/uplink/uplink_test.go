package uplink

import (
	"encoding/json"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/renumber/renumber/internal/agent/dhcp6"
	"github.com/renumber/renumber/internal/agent/policy"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"
)

func TestLinks(t *testing.T) {
	r1, r2 := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")
	global := policy.Policy{GlobalOnly: true}
	tests := []struct {
		name      string
		defaults  []string
		followers []Follower
		want      map[string]policy.Policy
	}{
		{"flags only", []string{"eth0"}, nil, map[string]policy.Policy{"eth0": global}},
		{"named interface added", []string{"eth0"}, []Follower{{Interface: "eth1", GlobalOnly: true}}, map[string]policy.Policy{"eth0": global, "eth1": global}},
		{"empty interface follows the flags", []string{"eth0"}, []Follower{{}}, map[string]policy.Policy{"eth0": {}}},
		{"one follower allowing non-global is enough", nil, []Follower{{Interface: "eth1", GlobalOnly: true}, {Interface: "eth1"}}, map[string]policy.Policy{"eth1": {}}},
		{"no followers, no flags", nil, nil, map[string]policy.Policy{}},
		{"trust and bounds of one follower", nil, []Follower{{Interface: "eth1", GlobalOnly: true, Trusted: []netip.Addr{r1}, MinLength: 48, MaxLength: 64}},
			map[string]policy.Policy{"eth1": {GlobalOnly: true, Trusted: []netip.Addr{r1}, MinLength: 48, MaxLength: 64}}},
		{"two followers: the routers either trusts, the widest bounds", nil, []Follower{
			{Interface: "eth1", Trusted: []netip.Addr{r2}, MinLength: 48, MaxLength: 56},
			{Interface: "eth1", Trusted: []netip.Addr{r1}, MinLength: 40, MaxLength: 64}},
			map[string]policy.Policy{"eth1": {Trusted: []netip.Addr{r1, r2}, MinLength: 40, MaxLength: 64}}},
		{"one follower trusting every router trusts them all", nil, []Follower{
			{Interface: "eth1", Trusted: []netip.Addr{r1}, MinLength: 48}, {Interface: "eth1"}},
			map[string]policy.Policy{"eth1": {}}},
		{"DHCPv6-PD on a link adds delegations, and leaves its trust alone", []string{"eth0"}, []Follower{
			{Interface: "wan", Delegated: true, GlobalOnly: true}, {Interface: "wan", GlobalOnly: true, Trusted: []netip.Addr{r1}}},
			map[string]policy.Policy{"eth0": global, "wan": {GlobalOnly: true, Trusted: []netip.Addr{r1}, Delegated: true}}},
		{"DHCPv6-PD alone", nil, []Follower{{Interface: "wan", Delegated: true, MaxLength: 56}},
			map[string]policy.Policy{"wan": {Delegated: true, MaxLength: 56}}},
		{"one follower following a deprecated prefix: the link does", nil, []Follower{
			{Interface: "eth1", GlobalOnly: true}, {Interface: "eth1", GlobalOnly: true, FollowDeprecated: true}},
			map[string]policy.Policy{"eth1": {GlobalOnly: true, FollowDeprecated: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Links(tt.defaults, tt.followers); !maps.EqualFunc(got, tt.want, policy.Policy.Equal) {
				t.Errorf("Links = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A trusted router that is not a link-local address makes the DynamicPrefix
// unreadable to the agent (the schema refuses it): believing every router
// would be the unsafe reading.
func TestDecodeRefusesATrustedRouterThatIsNotLinkLocal(t *testing.T) {
	for _, bad := range []string{"2001:db8::1", "192.0.2.1", "router", "ff02::2"} {
		raw := []byte(`{"spec":{"acquisition":{"routerAdvertisement":{"trustedRouters":["fe80::1",` + strconv.Quote(bad) + `]}}}}`)
		if _, err := Decode(raw); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	fs, err := Decode([]byte(`{"spec":{"acquisition":{"routerAdvertisement":{"trustedRouters":["fe80::2","FE80::1","fe80::2"]},"prefixFilter":{"minPrefixLength":48,"maxPrefixLength":64}}}}`))
	if err != nil || len(fs) != 1 || !slices.Equal(fs[0].Trusted, []netip.Addr{netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")}) || fs[0].MinLength != 48 || fs[0].MaxLength != 64 {
		t.Errorf("Decode = %+v, %v", fs, err)
	}
}

// TestDecodeAgreesWithTheAPITypes: the agent's view reads what the writer's
// spec model makes of the same object, for every combination of the fields
// involved.
func TestDecodeAgreesWithTheAPITypes(t *testing.T) {
	yes, no := true, false
	bools := []*bool{nil, &yes, &no}
	for _, ra := range []*dynamicprefix.RouterAdvertisement{nil, {}, {Interface: "eth1"}, {Interface: "eth1", Enabled: &no}, {Enabled: &yes}} {
		for _, global := range bools {
			var dp api.DynamicPrefix
			dp.Name = "home"
			dp.Spec.Acquisition.RouterAdvertisement = ra
			if global != nil {
				dp.Spec.Acquisition.PrefixFilter = &dynamicprefix.PrefixFilter{RequireGlobalUnicast: global}
			}
			raw, err := json.Marshal(dp)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := Decode(raw)
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			follows := len(fs) == 1
			var f Follower
			if follows {
				f = fs[0]
			}
			m := model.Parse(dp.Name, dp.Spec)
			if follows != m.RA {
				t.Errorf("%s: follows = %v, the writer's model says %v", raw, follows, m.RA)
				continue
			}
			if !follows {
				continue
			}
			if f.Interface != m.Interface || f.GlobalOnly != m.GlobalOnly {
				t.Errorf("%s: %+v, the writer's model says interface %q, global only %v", raw, f, m.Interface, m.GlobalOnly)
			}
		}
	}
}

func TestDecodeFollowDeprecated(t *testing.T) {
	fs, err := Decode([]byte(`{"spec":{"acquisition":{"routerAdvertisement":{"interface":"lan","followDeprecated":true}}}}`))
	want := []Follower{{Interface: "lan", GlobalOnly: true, FollowDeprecated: true}}
	if err != nil || !slices.EqualFunc(fs, want, Follower.Equal) {
		t.Errorf("Decode = %+v, %v; want %+v", fs, err, want)
	}
}

// A DynamicPrefix acquiring by both asks for Router Advertisements on one
// link and delegations on another, with the same filter.
func TestDecodeBothAcquisitions(t *testing.T) {
	fs, err := Decode([]byte(`{"spec":{"acquisition":{"routerAdvertisement":{"interface":"lan"},"dhcpv6pd":{"interface":"wan"},"prefixFilter":{"maxPrefixLength":60}}}}`))
	want := []Follower{{Interface: "lan", GlobalOnly: true, MaxLength: 60}, {Interface: "wan", GlobalOnly: true, MaxLength: 60, Delegated: true}}
	if err != nil || !slices.EqualFunc(fs, want, Follower.Equal) {
		t.Errorf("Decode = %+v, %v; want %+v", fs, err, want)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, raw := range []string{``, `[]`, `{"spec":{"acquisition":{"routerAdvertisement":{"interface":7}}}}`, `{"spec":{"acquisition":{"prefixFilter":{"requireGlobalUnicast":"no"}}}}`} {
		if _, err := Decode([]byte(raw)); err == nil {
			t.Errorf("Decode(%s) accepted", raw)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"spec":{"acquisition":{"routerAdvertisement":{"interface":"eth0","enabled":true},"prefixFilter":{"requireGlobalUnicast":false}}}}`))
	f.Add([]byte(`{"spec":{"acquisition":{}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fs, err := Decode(raw)
		if err != nil && fs != nil {
			t.Fatalf("error %v with a result %+v", err, fs)
		}
	})
}

// The agent runs a DHCPv6 client for a DynamicPrefix when its spec asks for
// the built-in client (mode client, the default) and the writer named this
// node; with the DynamicPrefix's identity and the length it asks for.
func TestTheDHCPv6ClientsOfThisNode(t *testing.T) {
	dp := func(pd, status string) []byte {
		return []byte(`{"metadata":{"name":"home","uid":"6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90"},` +
			`"spec":{"acquisition":{"dhcpv6pd":` + pd + `}},"status":` + status + `}`)
	}
	named := `{"dhcpv6pd":{"clientNode":"n1"}}`
	for _, c := range []struct {
		name, pd, status string
		want             dhcp6.Want
		ok               bool
	}{
		{"named, default mode and length", `{"interface":"wan"}`, named,
			dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 56}, true},
		{"named, length asked", `{"interface":"wan","mode":"client","requestedPrefixLength":60}`, named,
			dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 60}, true},
		{"a length the schema refuses: the default", `{"interface":"wan","requestedPrefixLength":200}`, named,
			dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 56}, true},
		{"trusted servers: canonical, repeats and malformed ones out", `{"interface":"wan","trustedServers":["00:02:00:00:09:BF:72:74","0003000102","00:02:00:00:09:bf:72:74","zz"]}`, named,
			dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 56, Servers: "0002000009bf7274,0003000102"}, true},
		{"another node named", `{"interface":"wan"}`, `{"dhcpv6pd":{"clientNode":"n2"}}`, dhcp6.Want{}, false},
		{"named confirmer", `{"interface":"wan"}`, `{"dhcpv6pd":{"clientNode":"n2","confirmerNode":"n1","unconfirmed":"2001:db8:bad::/56"}}`,
			dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 56, Confirm: true, Ask: "2001:db8:bad::/56"}, true},
		{"no node named yet", `{"interface":"wan"}`, `{}`, dhcp6.Want{}, false},
		{"host mode", `{"interface":"wan","mode":"host"}`, named, dhcp6.Want{}, false},
	} {
		got, ok := Client(dp(c.pd, c.status), "n1")
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if _, ok := Client([]byte(`{"spec":`), "n1"); ok {
		t.Error("a garbled DynamicPrefix runs a client")
	}
	// Being deleted, it frees the interface, as the writer has already
	// (controller.PDClients): the next by name on the link runs.
	deleting := []byte(`{"metadata":{"name":"home","uid":"u","deletionTimestamp":"2026-11-28T23:00:00Z","finalizers":["example.com/hold"]},` +
		`"spec":{"acquisition":{"dhcpv6pd":{"interface":"wan"}}},"status":` + named + `}`)
	if w, ok := Client(deleting, "n1"); ok {
		t.Errorf("a DynamicPrefix being deleted runs a client: %+v", w)
	}
	// The field names agree with the API types.
	var api api.DynamicPrefix
	api.Name, api.UID = "home", "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90"
	length := 48
	api.Spec.Acquisition.DHCPv6PD = &dynamicprefix.DHCPv6PD{Interface: "wan", Mode: dynamicprefix.ModeClient, RequestedPrefixLength: &length,
		TrustedServers: []string{"00:01:00:01"}}
	api.Status.DHCPv6PD = &dynamicprefix.DHCPv6PDStatus{ClientNode: "n1"}
	raw, err := json.Marshal(api)
	if err != nil {
		t.Fatal(err)
	}
	want := dhcp6.Want{Name: "home", UID: "6f1c2b1e-3d0a-4c55-9a8e-0d7f3c2a1b90", Link: "wan", Length: 48, Servers: "00010001"}
	if got, ok := Client(raw, "n1"); !ok || got != want {
		t.Errorf("from the API types: %+v %v, want %+v", got, ok, want)
	}
}
