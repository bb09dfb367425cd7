package holdings

import (
	"fmt"
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
)

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

// The Service cache slims a listed Service twice (its list page, then its
// transform): the second changes nothing, so an oversized Service read
// again when the space grows is still oversized, not a Service that follows
// with no suffix (the fresh-clone CI of stop 51 failed so).
func TestSlimmingASlimServiceChangesNothing(t *testing.T) {
	big := strings.Repeat("a.example.org,", MaxKeptBytes/len("a.example.org,")+1)
	space := []netip.Prefix{netip.MustParsePrefix("2001:db8::/48")}
	for _, ann := range []map[string]string{
		{dynamicprefix.AnnotationName: "home", AnnotationSuffix: "::1", AnnotationTarget: big},
		{dynamicprefix.AnnotationName: "home", AnnotationSuffix: "::1", AnnotationTarget: "lb.example.org", "example.com/other": "c"},
		{AnnotationIPs: "2001:db8::7"},
		nil,
	} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: ann}}
		for i := range MaxKeptPublished + 3 {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: fmt.Sprintf("2001:db8::%x", i+1)})
		}
		once := SlimIn(s, DefaultTargetKeys, space)
		if twice := SlimIn(once, DefaultTargetKeys, space); !equality.Semantic.DeepEqual(twice, once) {
			t.Errorf("slimmed again:\n%+v\nonce:\n%+v", twice, once)
		}
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

// A record the rendering says is carried but names nothing is written
// present and empty (it owns nothing), not removed: on a Service that
// follows a DynamicPrefix an absent record would hand the user's entries to
// the existing operator's geometric rule (and renumber-writer-values
// refuses its removal there). One not carried is removed.
func TestAnEmptyRecordIsKeptWhereItIsCarried(t *testing.T) {
	live := Live(map[string]string{AnnotationIPs: "192.0.2.7,2001:db8:1::1", AnnotationManagedIPs: "2001:db8:1::1",
		AnnotationTarget: "a.example.org", AnnotationManagedTarget: "2001:db8:1::1"}, DefaultTargetKeys)
	for _, c := range []struct {
		name     string
		recorded bool
		want     any
	}{{"carried", true, ""}, {"released", false, nil}} {
		a := Annotations{IPs: map[string][]string{AnnotationIPs: {"192.0.2.7"}}, Targets: map[string][]string{AnnotationTarget: {"a.example.org"}},
			IPsRecorded: c.recorded, TargetsRecorded: c.recorded}
		p := a.Patch(live)
		for _, k := range []string{AnnotationManagedIPs, AnnotationManagedTarget} {
			if v, ok := p[k]; !ok || v != c.want {
				t.Errorf("%s: %s patched to %#v, want %#v", c.name, k, v, c.want)
			}
		}
	}
}
