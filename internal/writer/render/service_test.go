package render

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
)

var (
	prefixOld = netip.MustParsePrefix("2001:db8:a::/64")
	model     = api.Parse("home", dynamicprefix.Spec{
		AddressRanges: []dynamicprefix.AddressRange{{Name: "lb", Start: "::ffff:0:0:0", End: "::ffff:ffff:ffff:ffff"}},
		Subnets:       []dynamicprefix.Subnet{{Name: "svc", Offset: 1, PrefixLength: 112}},
	})
)

func TestAddress(t *testing.T) {
	tests := []struct {
		name string
		f    ServiceFollow
		want string
	}{
		{"suffix on the prefix", ServiceFollow{Suffix: "::ffff:0:1"}, "2001:db8:b::ffff:0:1"},
		{"suffix inside the address range", ServiceFollow{Suffix: "::ffff:0:0:7", Range: "lb"}, "2001:db8:b:0:ffff::7"},
		{"suffix on the subnet", ServiceFollow{Suffix: "::9", Subnet: "svc"}, "2001:db8:b::1:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServiceAddress(model, tt.f, cur)
			if err != nil || got.String() != tt.want {
				t.Errorf("ServiceAddress = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	for _, f := range []ServiceFollow{{}, {Suffix: "nope"}, {Suffix: "::1", Range: "lb"}, {Suffix: "::1", Subnet: "x"}, {Suffix: "::1:0:0", Subnet: "svc"}} {
		if _, err := ServiceAddress(model, f, cur); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("ServiceAddress(%+v) err = %v, want ErrSpec", f, err)
		}
	}
}

func TestRenderHA(t *testing.T) {
	f := ServiceFollow{Suffix: "::ffff:0:1"}
	// Written before keys could be chosen: the alpha key, no keys record.
	live := Live(map[string]string{
		AnnotationIPs: "192.0.2.7,2001:db8:a::ffff:0:1", AnnotationManagedIPs: "2001:db8:a::ffff:0:1",
		AnnotationTargetAlpha: "lb.example.org,2001:db8:a::ffff:0:1", AnnotationManagedTarget: "2001:db8:a::ffff:0:1",
	}, DefaultTargetKeys)
	got, err := Service(model, f, []netip.Prefix{cur, prefixOld}, live, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"192.0.2.7", "2001:db8:b::ffff:0:1", "2001:db8:a::ffff:0:1"}; !slices.Equal(got.IPs[AnnotationIPs], want) {
		t.Errorf("ips = %q, want user entry + current + retained %q", got.IPs[AnnotationIPs], want)
	}
	if want := []string{"lb.example.org", "2001:db8:b::ffff:0:1"}; !slices.Equal(got.Targets[AnnotationTargetAlpha], want) {
		t.Errorf("alpha targets = %q, want user hostname + current only %q", got.Targets[AnnotationTargetAlpha], want)
	}
	if want := []string{"2001:db8:b::ffff:0:1"}; !slices.Equal(got.Targets[AnnotationTarget], want) {
		t.Errorf("v0.22 targets = %q, want the current address %q", got.Targets[AnnotationTarget], want)
	}
	if !slices.Equal(got.TargetKeys, DefaultTargetKeys) || !slices.Equal(got.ManagedTargets, []string{"2001:db8:b::ffff:0:1"}) {
		t.Errorf("records: keys %q targets %q", got.TargetKeys, got.ManagedTargets)
	}
	again, _ := Service(model, f, []netip.Prefix{cur, prefixOld}, got, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if !again.Equal(got) {
		t.Errorf("rendering twice changes the Service:\n%+v\n%+v", got, again)
	}
	skip := f
	skip.SkipDNS = true
	got, _ = Service(model, skip, []netip.Prefix{cur}, live, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if !slices.Equal(got.Targets[AnnotationTargetAlpha], []string{"lb.example.org"}) || len(got.Targets[AnnotationTarget]) != 0 ||
		len(got.ManagedTargets) != 0 || len(got.TargetKeys) != 0 {
		t.Errorf("skip-external-dns-update: %+v", got)
	}
}

// A key dropped from the list is released (the user's entries under it stay);
// a key added gets the target; the record follows the list.
func TestTargetKeysFollowTheList(t *testing.T) {
	f := ServiceFollow{Suffix: "::ffff:0:1"}
	both, _ := Service(model, f, []netip.Prefix{cur}, Live(map[string]string{AnnotationTargetAlpha: "lb.example.org"}, DefaultTargetKeys), nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	ann := map[string]string{}
	for k, v := range both.Patch(Annotations{}) {
		if v != nil {
			ann[k] = v.(string)
		}
	}
	newOnly := []string{AnnotationTarget}
	live := Live(ann, newOnly)
	if !slices.Equal(live.Targets[AnnotationTargetAlpha], []string{"lb.example.org", "2001:db8:b::ffff:0:1"}) {
		t.Fatalf("the record's keys are read even when not asked for: %+v", live)
	}
	got, _ := Service(model, f, []netip.Prefix{cur}, live, nil, ServiceOptions{TargetKeys: newOnly})
	if !slices.Equal(got.Targets[AnnotationTargetAlpha], []string{"lb.example.org"}) {
		t.Errorf("alpha after being dropped: %q, want the user's entry only", got.Targets[AnnotationTargetAlpha])
	}
	if !slices.Equal(got.TargetKeys, newOnly) || !slices.Equal(got.Targets[AnnotationTarget], []string{"2001:db8:b::ffff:0:1"}) {
		t.Errorf("after: %+v", got)
	}
	patch := got.Patch(live)
	if patch[AnnotationTargetAlpha] != "lb.example.org" || patch[AnnotationManagedTargetKeys] != AnnotationTarget {
		t.Errorf("patch %v", patch)
	}
	// No key at all: every target of ours goes, the records too.
	none, _ := Service(model, f, []netip.Prefix{cur}, Live(ann, nil), nil, ServiceOptions{})
	if len(none.Targets[AnnotationTarget]) != 0 || none.Targets[AnnotationTargetAlpha][0] != "lb.example.org" || none.TargetKeys != nil || none.ManagedTargets != nil {
		t.Errorf("no keys: %+v", none)
	}
}

// An entry the user lists under one key is the user's under every key: it is
// never removed, at the price of not being claimed under the others.
func TestATargetTheUserListsIsNeverClaimed(t *testing.T) {
	f := ServiceFollow{Suffix: "::ffff:0:1"}
	live := Live(map[string]string{AnnotationTarget: "2001:db8:b::ffff:0:1"}, DefaultTargetKeys)
	got, _ := Service(model, f, []netip.Prefix{cur}, live, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if len(got.ManagedTargets) != 0 {
		t.Errorf("record %q claims an entry the user wrote", got.ManagedTargets)
	}
	later, _ := Service(model, f, []netip.Prefix{prefixOld}, got, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if !slices.Contains(later.Targets[AnnotationTarget], "2001:db8:b::ffff:0:1") {
		t.Errorf("the user's entry was removed: %q", later.Targets[AnnotationTarget])
	}
}

// DNS follows the address: while the load balancer has not published the new
// address, the target stays on the previous one (still allocated, still
// answering); it moves once the new one is published, and at once where
// waiting would not help.
func TestTheTargetWaitsForTheLoadBalancer(t *testing.T) {
	f := ServiceFollow{Suffix: "::ffff:0:1"}
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	live := Live(map[string]string{
		AnnotationIPs: "192.0.2.7," + was, AnnotationManagedIPs: was,
		AnnotationTarget: was, AnnotationManagedTarget: was, AnnotationManagedTargetKeys: AnnotationTarget,
	}, []string{AnnotationTarget})
	render := func(pooled []netip.Prefix, ingress ...string) Annotations {
		t.Helper()
		got, err := Service(model, f, pooled, live, ingress, ServiceOptions{TargetKeys: []string{AnnotationTarget}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	held := render([]netip.Prefix{cur, prefixOld}, "192.0.2.7", was)
	if !slices.Equal(held.IPs[AnnotationIPs], []string{"192.0.2.7", now, was}) {
		t.Errorf("ips = %q: the new address must be asked for at once", held.IPs[AnnotationIPs])
	}
	if !slices.Equal(held.Targets[AnnotationTarget], []string{was}) || !slices.Equal(held.ManagedTargets, []string{was}) {
		t.Errorf("not yet published: target %q record %q, want both still %s", held.Targets[AnnotationTarget], held.ManagedTargets, was)
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
		if !slices.Equal(got.Targets[AnnotationTarget], []string{now}) || !slices.Equal(got.ManagedTargets, []string{now}) {
			t.Errorf("%s: target %q record %q, want %s", m.why, got.Targets[AnnotationTarget], got.ManagedTargets, now)
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
		AnnotationIPs: was, AnnotationManagedIPs: was, AnnotationL2Nudged: was,
		AnnotationTarget: was, AnnotationManagedTarget: was, AnnotationManagedTargetKeys: AnnotationTarget,
	}
	old := ServiceOptions{TargetKeys: []string{AnnotationTarget}, L2Nudge: true}
	render := func(f ServiceFollow, o ServiceOptions, live Annotations, pooled []netip.Prefix, ingress ...string) Annotations {
		t.Helper()
		f.Suffix = "::ffff:0:1"
		got, err := Service(model, f, pooled, live, ingress, o)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	both := []netip.Prefix{cur, prefixOld}
	asked := render(ServiceFollow{}, old, Live(ann, old.TargetKeys), both, was)
	if !slices.Equal(asked.L2Nudged, []string{was}) {
		t.Errorf("before the new address is published: nudge %q, want the last one %q", asked.L2Nudged, was)
	}
	moved := render(ServiceFollow{}, old, asked, both, now, was)
	if !slices.Equal(moved.L2Nudged, []string{now, was}) || !slices.Equal(moved.ManagedTargets, []string{now}) {
		t.Errorf("published: nudge %q target %q, want the nudge %q and the target moved in one rendering", moved.L2Nudged, moved.ManagedTargets, []string{now, was})
	}
	if again := render(ServiceFollow{}, old, moved, both, now, was); !again.Equal(moved) {
		t.Errorf("a second look nudges again: %+v", again)
	}
	drained := render(ServiceFollow{}, old, moved, []netip.Prefix{cur}, now)
	if !slices.Equal(drained.L2Nudged, []string{now, was}) {
		t.Errorf("a drain ending changed the nudge to %q: an address going away needs none", drained.L2Nudged)
	}
	fixed := ServiceOptions{TargetKeys: old.TargetKeys}
	for _, c := range []struct {
		why  string
		f    ServiceFollow
		o    ServiceOptions
		want []string
	}{
		{"a fixed Cilium", ServiceFollow{}, fixed, []string{was}},
		{"skip-l2-nudge", ServiceFollow{SkipL2Nudge: true}, old, []string{was}},
		{"force-l2-nudge on a fixed Cilium", ServiceFollow{ForceL2Nudge: true}, fixed, []string{now, was}},
	} {
		if got := render(c.f, c.o, asked, both, now, was); !slices.Equal(got.L2Nudged, c.want) {
			t.Errorf("%s: nudge %q, want %q", c.why, got.L2Nudged, c.want)
		}
	}
	if r := ReleaseService(moved); r.L2Nudged != nil || r.Patch(moved)[AnnotationL2Nudged] != nil {
		t.Errorf("release keeps the nudge: %+v", r)
	}
}

// The Service cache keeps a Service's identity, our annotations and the
// addresses its load balancer publishes: nothing of its spec.
func TestSlim(t *testing.T) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "7", UID: "u", CreationTimestamp: metav1.Unix(7, 0),
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{AnnotationIPs: "2001:db8::1", "example.com/x": "y"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "2001:0db8::1", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}, {Hostname: "lb.example.org"}, {IP: "192.0.2.7"}}}},
	}
	got := Slim(s, nil)
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "7", UID: "u", CreationTimestamp: metav1.Unix(7, 0),
			Annotations: map[string]string{AnnotationIPs: "2001:db8::1"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "2001:0db8::1"}, {IP: "192.0.2.7"}}}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Slim = %+v\nwant %+v", got, want)
	}
	if ips := Ingress(got); !slices.Equal(ips, []string{"2001:db8::1", "192.0.2.7"}) {
		t.Errorf("Ingress = %q, want canonical addresses", ips)
	}
}

// Switching a Service's load balancer moves our addresses to the key the new
// one reads; the user's entries stay under every key, and a Service that
// stays on Cilium carries no record of the key.
func TestSwitchingProviderMovesOurAddresses(t *testing.T) {
	const was, now = "2001:db8:a::ffff:0:1", "2001:db8:b::ffff:0:1"
	live := Live(map[string]string{
		AnnotationIPs: "192.0.2.7," + was, AnnotationManagedIPs: was, AnnotationKubeVIPIPs: "192.0.2.8",
	}, nil)
	opt := ServiceOptions{L2Nudge: true}
	kv := ServiceFollow{Suffix: "::ffff:0:1", Provider: "kube-vip"}
	got, err := Service(model, kv, []netip.Prefix{cur}, live, []string{now}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IPs[AnnotationIPs], []string{"192.0.2.7"}) || !slices.Equal(got.IPs[AnnotationKubeVIPIPs], []string{"192.0.2.8", now}) ||
		!slices.Equal(got.ManagedIPs, []string{now}) || got.IPsKey != AnnotationKubeVIPIPs {
		t.Errorf("to kube-vip: %+v", got)
	}
	if got.L2Nudged != nil {
		t.Errorf("a kube-vip Service got Cilium's L2 nudge: %q", got.L2Nudged)
	}
	patch := got.Patch(live)
	if patch[AnnotationIPs] != "192.0.2.7" || patch[AnnotationKubeVIPIPs] != "192.0.2.8,"+now || patch[AnnotationManagedIPsKey] != AnnotationKubeVIPIPs {
		t.Errorf("patch %v", patch)
	}
	back, _ := Service(model, ServiceFollow{Suffix: "::ffff:0:1", Provider: "cilium"}, []netip.Prefix{cur}, got, nil, ServiceOptions{})
	if !slices.Equal(back.IPs[AnnotationIPs], []string{"192.0.2.7", now}) || !slices.Equal(back.IPs[AnnotationKubeVIPIPs], []string{"192.0.2.8"}) ||
		back.IPsKey != "" || back.Patch(got)[AnnotationManagedIPsKey] != nil {
		t.Errorf("back to cilium: %+v", back)
	}
	if _, err := Service(model, ServiceFollow{Suffix: "::1", Provider: "metallb"}, []netip.Prefix{cur}, live, nil, opt); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("unknown provider: err = %v", err)
	}
	if r := ReleaseService(got); !slices.Equal(r.IPs[AnnotationKubeVIPIPs], []string{"192.0.2.8"}) || r.IPsKey != "" || r.Owned() {
		t.Errorf("release from kube-vip: %+v", r)
	}
}

func TestCheckTargetKeys(t *testing.T) {
	for _, ok := range [][]string{DefaultTargetKeys, {AnnotationTarget}, {"example.com/target"}, nil} {
		if err := CheckTargetKeys(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"not a key"}, {AnnotationTarget, AnnotationTarget}, {AnnotationIPs}, {"dynamic-prefix.io/managed-ips"}, {"/target"}} {
		if err := CheckTargetKeys(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReleaseKeepsUserEntries(t *testing.T) {
	live := Live(map[string]string{
		AnnotationIPs: "192.0.2.7,2001:db8:b::1", AnnotationManagedIPs: "2001:db8:b::1",
		AnnotationTarget: "lb.example.org,2001:db8:b::1", AnnotationTargetAlpha: "2001:db8:b::1",
		AnnotationManagedTarget: "2001:db8:b::1", AnnotationManagedTargetKeys: AnnotationTarget + "," + AnnotationTargetAlpha,
	}, nil)
	got := ReleaseService(live)
	if !slices.Equal(got.IPs[AnnotationIPs], []string{"192.0.2.7"}) || got.ManagedIPs != nil || got.ManagedTargets != nil || got.TargetKeys != nil ||
		!slices.Equal(got.Targets[AnnotationTarget], []string{"lb.example.org"}) || len(got.Targets[AnnotationTargetAlpha]) != 0 {
		t.Errorf("release = %+v", got)
	}
	if p := got.Patch(live); p[AnnotationTargetAlpha] != nil || p[AnnotationTarget] != "lb.example.org" {
		t.Errorf("release patch %v", p)
	}
}

func TestSplit(t *testing.T) {
	if got := Split(" 2001:db8::1, ,lb.example.org,"); !slices.Equal(got, []string{"2001:db8::1", "lb.example.org"}) {
		t.Errorf("Split = %q", got)
	}
}

// The Service cache keeps our annotations, the keys asked for and the keys the
// record names (to release them), and nothing else.
func TestKeep(t *testing.T) {
	ann := map[string]string{
		"dynamic-prefix.io/name": "home", AnnotationIPs: "2001:db8::1", AnnotationTarget: "a",
		"example.com/old-target": "b", AnnotationManagedTargetKeys: "example.com/old-target",
		"kubectl.kubernetes.io/last-applied-configuration": "{...}", "example.com/other": "c",
	}
	got := Keep(ann, []string{AnnotationTarget})
	want := map[string]string{"dynamic-prefix.io/name": "home", AnnotationIPs: "2001:db8::1", AnnotationTarget: "a",
		"example.com/old-target": "b", AnnotationManagedTargetKeys: "example.com/old-target"}
	if !maps.Equal(got, want) {
		t.Errorf("Keep = %v, want %v", got, want)
	}
	if Keep(map[string]string{"example.com/other": "c"}, DefaultTargetKeys) != nil {
		t.Error("a Service with nothing of ours keeps annotations")
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
		AnnotationIPs:         "192.0.2.7,2001:db8:b::ffff:0:1,2001:db8:9::ffff:0:1,2001:db8:a::ffff:0:1",
		AnnotationManagedIPs:  "2001:db8:b::ffff:0:1,2001:db8:9::ffff:0:1,2001:db8:a::ffff:0:1",
		AnnotationTargetAlpha: "lb.example.org,2001:db8:b::ffff:0:1", AnnotationManagedTarget: "2001:db8:b::ffff:0:1",
	}
	alpha := []string{AnnotationTargetAlpha}
	live := Live(ann, alpha)
	want, err := Service(model, ServiceFollow{Suffix: "::ffff:0:1"}, pooled, live, nil, ServiceOptions{TargetKeys: alpha})
	if err != nil {
		t.Fatal(err)
	}
	if !want.Equal(live) {
		t.Errorf("under the alpha key alone: a write, patch %v", want.Patch(live))
	}
	live = Live(ann, DefaultTargetKeys)
	want, _ = Service(model, ServiceFollow{Suffix: "::ffff:0:1"}, pooled, live, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if want.Equal(live) || want.Patch(live)[AnnotationTarget] != "2001:db8:b::ffff:0:1" {
		t.Errorf("under both keys: want one write adding %s, patch %v", AnnotationTarget, want.Patch(live))
	}
}

func TestAnAddressThatBecomesCurrentAgainMovesToTheFront(t *testing.T) {
	// a was current, then b; now a is current again.
	live := Live(map[string]string{
		AnnotationIPs:        "192.0.2.7,2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1",
		AnnotationManagedIPs: "2001:db8:b::ffff:0:1,2001:db8:a::ffff:0:1", AnnotationSkipDNS: "true",
	}, DefaultTargetKeys)
	want, err := Service(model, ServiceFollow{Suffix: "::ffff:0:1", SkipDNS: true}, []netip.Prefix{prefixOld, cur}, live, nil, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if want.Equal(live) {
		t.Fatal("the same set in the old order: no write, so the reactivated address stays behind")
	}
	if got := want.Patch(live)[AnnotationIPs]; got != "192.0.2.7,2001:db8:a::ffff:0:1,2001:db8:b::ffff:0:1" {
		t.Errorf("ips patch = %v", got)
	}
}

// Anyone who may edit a Service can write 256 KiB into a target key: the
// cache keeps no more than MaxKeptBytes of what renumber reads, and marks
// the Service as oversized instead, keeping only what it follows.
func TestSlimBoundsWhatItKeeps(t *testing.T) {
	big := strings.Repeat("a.example.org,", MaxKeptBytes/len("a.example.org,")+1)
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{
		dynamicprefix.AnnotationName: "home", AnnotationSuffix: "::1", AnnotationTarget: big}}}
	got := Slim(s, DefaultTargetKeys)
	if n, over := Oversized(got); !over || n <= MaxKeptBytes {
		t.Errorf("Oversized = %d, %v; want the size past %d", n, over, MaxKeptBytes)
	}
	if len(got.Annotations) != 2 || got.Annotations[dynamicprefix.AnnotationName] != "home" {
		t.Errorf("kept %v, want only the mark and what it follows", got.Annotations)
	}
	s.Annotations[AnnotationTarget] = "lb.example.org"
	if _, over := Oversized(Slim(s, DefaultTargetKeys)); over {
		t.Error("a Service of ordinary size is marked oversized")
	}
}

// A keys record naming a key renumber never writes (an address key, one of
// its own records, a repeat) is ignored: the record is the tenant's to edit.
func TestAForgedKeysRecordIsIgnored(t *testing.T) {
	live := Live(map[string]string{
		AnnotationManagedTargetKeys: "lbipam.cilium.io/ips,dynamic-prefix.io/managed-ips,example.com/target,example.com/target,not a key",
		AnnotationIPs:               "192.0.2.7",
	}, DefaultTargetKeys)
	if want := []string{"example.com/target"}; !slices.Equal(live.TargetKeys, want) {
		t.Errorf("TargetKeys = %q, want %q", live.TargetKeys, want)
	}
	if _, ok := live.Targets[AnnotationIPs]; ok {
		t.Errorf("the address key is read as a target key: %v", live.Targets)
	}
}

// A Service whose address is a ULA its router maps onto the followed prefix
// (nptv6): the DNS target is the mapped address of what the load balancer
// publishes inside the mapping prefix; the Service's addresses are never
// written; the user's IPv4 target stays beside ours.
func TestAMappedTargetFollowsThePrefixNotTheAddress(t *testing.T) {
	m := api.Parse("home", dynamicprefix.Spec{Acquisition: dynamicprefix.Acquisition{
		RouterAdvertisement: &dynamicprefix.RouterAdvertisement{DelegatedPrefixLength: ptr.To(48)}}})
	f := ServiceFollowOf(map[string]string{dynamicprefix.AnnotationName: "home",
		AnnotationMapping: api.MappingNPTv6, AnnotationMappingPrefix: "fd01:203:405::/48"})
	a, b := netip.MustParsePrefix("2001:db8:1:100::/64"), netip.MustParsePrefix("2001:db8:2:200::/64")
	opt := ServiceOptions{TargetKeys: DefaultTargetKeys}
	ula := "fd01:203:405:1::1234"
	live := Live(map[string]string{AnnotationIPs: ula, AnnotationTarget: "192.0.2.10", AnnotationTargetAlpha: "192.0.2.10"}, DefaultTargetKeys)

	// Nothing published yet: no target of ours.
	got, err := Service(m, f, []netip.Prefix{a}, live, nil, opt)
	if err != nil || len(got.ManagedTargets) != 0 || !got.Equal(live) {
		t.Fatalf("before the load balancer publishes: %+v, %v", got, err)
	}
	// Published: RFC 6296's example, on the /48 the advertised /64 is part of.
	got, err = Service(m, f, []netip.Prefix{a}, live, []string{ula, "192.0.2.99"}, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"192.0.2.10", "2001:db8:1:d550::1234"}
	for _, k := range DefaultTargetKeys {
		if !slices.Equal(got.Targets[k], want) {
			t.Errorf("%s = %q, want %q", k, got.Targets[k], want)
		}
	}
	if !slices.Equal(got.IPs[AnnotationIPs], []string{ula}) || len(got.ManagedIPs) != 0 {
		t.Errorf("the Service's address was touched: %v, managed %v", got.IPs, got.ManagedIPs)
	}
	// The ISP renumbers: the target moves to B's mapping; A's is gone at once
	// (the router maps only the current prefix).
	live = got
	got, _ = Service(m, f, []netip.Prefix{b, a}, live, []string{ula}, opt)
	if want := []string{"192.0.2.10", "2001:db8:2:d54f::1234"}; !slices.Equal(got.Targets[AnnotationTarget], want) {
		t.Errorf("after renumbering: %q, want %q", got.Targets[AnnotationTarget], want)
	}
	// The load balancer restarts and publishes nothing for a while: the
	// target stays.
	live = got
	if again, _ := Service(m, f, []netip.Prefix{b, a}, live, nil, opt); !again.Equal(live) {
		t.Errorf("with nothing published the target moved: %v", again.Targets)
	}
}

func TestAMappingThatCannotBeUsedIsInvalid(t *testing.T) {
	a := []netip.Prefix{netip.MustParsePrefix("2001:db8:1:100::/64")}
	for _, ann := range []map[string]string{
		{AnnotationMapping: "nat66", AnnotationMappingPrefix: "fd01::/64"},
		{AnnotationMapping: api.MappingNPTv6, AnnotationMappingPrefix: "fd01::"},
		{AnnotationMapping: api.MappingNPTv6, AnnotationMappingPrefix: "10.0.0.0/8"},
		{AnnotationMapping: api.MappingNPTv6, AnnotationMappingPrefix: "fd01::/48"}, // the followed prefix is a /64, no delegation
	} {
		if _, err := Service(model, ServiceFollowOf(ann), a, Annotations{}, []string{"fd01::1"}, ServiceOptions{TargetKeys: DefaultTargetKeys}); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", ann, err)
		}
	}
}

// A Service that held addresses of ours (mode ha) and now asks for a mapped
// target: our addresses go, the user's stay.
func TestAMappedServiceReleasesTheAddressesItHeld(t *testing.T) {
	live := Live(map[string]string{AnnotationIPs: "2001:db8:1:100::1,fd01::1", AnnotationManagedIPs: "2001:db8:1:100::1"}, DefaultTargetKeys)
	f := ServiceFollowOf(map[string]string{AnnotationMapping: api.MappingNetmap, AnnotationMappingPrefix: "fd01::/64"})
	got, err := Service(model, f, []netip.Prefix{netip.MustParsePrefix("2001:db8:1:100::/64")}, live, []string{"fd01::1"}, ServiceOptions{TargetKeys: DefaultTargetKeys})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IPs[AnnotationIPs], []string{"fd01::1"}) || got.IPsRecorded {
		t.Errorf("addresses %v (recorded %v), want the user's alone", got.IPs, got.IPsRecorded)
	}
	if want := []string{"2001:db8:1:100::1"}; !slices.Equal(got.Targets[AnnotationTarget], want) {
		t.Errorf("target %q, want %q", got.Targets[AnnotationTarget], want)
	}
}

// A Service with more entries in an address, target or record annotation
// than the admission policy lets the writer write is left alone; 64 pass.
func TestTooManyEntries(t *testing.T) {
	many := func(n int) string { return strings.TrimSuffix(strings.Repeat("2001:db8::1,", n), ",") }
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want bool
	}{
		{"64 addresses", map[string]string{AnnotationIPs: many(64)}, false},
		{"65 addresses", map[string]string{AnnotationIPs: many(65)}, true},
		{"65 targets under any key", map[string]string{"example.org/target": many(65)}, true},
		{"65 in the record", map[string]string{AnnotationManagedIPs: many(65)}, true},
		{"65 empty entries", map[string]string{AnnotationKubeVIPIPs: strings.Repeat(",", 64)}, true},
		{"a user's other annotation", map[string]string{"example.org/list": many(100)}, false},
	} {
		if _, got := TooManyEntries(tc.ann); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
