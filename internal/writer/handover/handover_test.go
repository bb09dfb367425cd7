package handover

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/model"
	"github.com/renumber/renumber/internal/writer/render"
)

// operatorPools is how the existing operator reads a status (its pool sync,
// compat.md): the current prefix, then status.history up to
// maxPrefixHistory entries, whatever their state. The fixture of what it
// reads, not our code.
func operatorPools(st api.Status, maxHistory int) []string {
	out := []string{st.CurrentPrefix}
	for i, h := range st.History {
		if i >= maxHistory {
			break
		}
		if !slices.Contains(out, h.Prefix) {
			out = append(out, h.Prefix)
		}
	}
	return out
}

var t0 = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// ours renders, with renumber's own aggregate, the status after A -> B -> C
// -> D under renumber, every prefix still reported deprecated except A,
// whose valid lifetime ran out, and the prefixes renumber pools then.
func ours(t *testing.T, maxHistory int) (api.Status, []string) {
	m := model.Parse("home", dynamicprefix.Spec{
		Acquisition: dynamicprefix.Acquisition{RouterAdvertisement: &dynamicprefix.RouterAdvertisement{Interface: "eth0"}},
		Transition:  &dynamicprefix.Transition{MaxPrefixHistory: maxHistory},
	})
	var st api.Status
	var pooled []string
	for i, s := range []string{
		"2001:db8:a::/64 p ra",
		"2001:db8:a::/64 d600 ra,2001:db8:b::/64 p ra",
		"2001:db8:a::/64 d600 ra,2001:db8:b::/64 d600 ra,2001:db8:c::/64 p ra",
		"2001:db8:b::/64 d600 ra,2001:db8:c::/64 d600 ra,2001:db8:d::/64 p ra",
	} {
		n, err := digest.Decode("v1;eth0=" + s)
		if err != nil {
			t.Fatal(err)
		}
		d := decide.For(m, render.Prior(st), []decide.Report{{Node: "n", Digest: n}}, t0.Add(time.Duration(i)*time.Minute))
		st = api.Status{CurrentPrefix: d.Current.String(), History: render.History(m, d.History),
			Conditions: []metav1.Condition{{Type: decide.PrefixAcquired, Status: "True", LastTransitionTime: metav1.NewTime(t0)}}}
		pooled = pooled[:0]
		for _, p := range d.Pooled {
			pooled = append(pooled, p.String())
		}
	}
	return st, pooled
}

// The way back: the existing operator, reading the handed-over status, pools
// exactly what renumber pools (a draining prefix is neither withdrawn early
// nor an expired one brought back), and dates the current prefix as renumber
// did.
func TestTheExistingOperatorReadsTheHandedOverStatusAsRenumberPoolsIt(t *testing.T) {
	for _, maxHistory := range []int{1, 2, 3} {
		st, want := ours(t, maxHistory)
		slices.Sort(want)
		read := func(st api.Status) []string {
			got := operatorPools(st, maxHistory)
			slices.Sort(got)
			return got
		}
		if got := read(st); slices.Equal(got, want) != (maxHistory == 3) {
			// Renumber's own history (current first) makes it drop a draining prefix early (max 1 and 2).
			t.Errorf("max %d: the operator reads renumber's own status as %q (renumber pools %q)", maxHistory, got, want)
		}
		back := Status(st)
		if got := read(back); !slices.Equal(got, want) {
			t.Errorf("max %d: the operator would pool %q, renumber pools %q", maxHistory, got, want)
		}
		for _, h := range back.History {
			if h.State != model.StateDraining || h.ExpiresAt != nil {
				t.Errorf("max %d: entry %+v: only draining entries, without our expiresAt", maxHistory, h)
			}
		}
		if c := back.Conditions[0]; !c.LastTransitionTime.Time.Equal(t0.Add(3 * time.Minute)) {
			t.Errorf("max %d: PrefixAcquired turned at %v, want D's acquiredAt", maxHistory, c.LastTransitionTime)
		}
		if !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
			t.Errorf("max %d: Status changed its argument's conditions", maxHistory)
		}
	}
}

func TestServiceHandsBackTheTargetKeys(t *testing.T) {
	const cur = "2001:db8:d::ffff:0:1"
	ann := map[string]string{
		holdings.AnnotationIPs: "192.0.2.7," + cur, holdings.AnnotationManagedIPs: cur,
		holdings.AnnotationTarget: "web.example.org," + cur, holdings.AnnotationTargetAlpha: cur,
		holdings.AnnotationManagedTarget: cur, holdings.AnnotationManagedTargetKeys: holdings.AnnotationTarget + "," + holdings.AnnotationTargetAlpha,
		holdings.AnnotationL2Nudged: cur,
	}
	tests := []struct {
		name string
		keys []string
		want map[string]any
	}{
		{"to v0.0.17 and older (the alpha key alone)", []string{holdings.AnnotationTargetAlpha}, map[string]any{
			holdings.AnnotationTarget: "web.example.org", holdings.AnnotationManagedTargetKeys: nil, holdings.AnnotationL2Nudged: nil}},
		{"to v0.0.18 and later (both keys)", holdings.DefaultTargetKeys, map[string]any{
			holdings.AnnotationManagedTargetKeys: nil, holdings.AnnotationL2Nudged: nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Service(ann, tt.keys)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	if p := Service(map[string]string{holdings.AnnotationIPs: cur, holdings.AnnotationManagedIPs: cur,
		holdings.AnnotationTargetAlpha: cur, holdings.AnnotationManagedTarget: cur}, []string{holdings.AnnotationTargetAlpha}); p != nil {
		t.Errorf("a Service in the operator's own shape needs nothing: %v", p)
	}
}

// operatorLists is how the existing operator finds the draining siblings of
// parent (its Calico backend): by these labels, each expected under the name
// parent + "-" + the first 8 hex digits of sha256(cidr). The fixture of what
// it reads, not our code.
func operatorLists(u *unstructured.Unstructured, parent, cidr string) bool {
	l := u.GetLabels()
	return l["app.kubernetes.io/managed-by"] == "dynamic-prefix-operator" && l["dynamic-prefix.io/parent-pool"] == parent &&
		u.GetName() == parent+"-"+fmt.Sprintf("%x", sha256.Sum256([]byte(cidr)))[:8]
}

func TestOurCalicoSiblingIsReplacedByTheOneTheOperatorFinds(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
		"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{"dynamic-prefix.io/name": "home"}},
		"spec":     map[string]any{"cidr": "2001:db8:c::/64", "blockSize": int64(122)},
	}}
	read, _ := backends.ReadIPPool(parent)
	plan := backends.RenderCalico(read.(*backends.IPPool), "home", []string{"2001:db8:c::/64", "2001:db8:b::/64"})
	ours := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "spec": plan.Siblings[0].Spec}}
	ours.SetName(plan.Siblings[0].Name)
	ours.SetLabels(plan.Siblings[0].Labels)
	ours.SetResourceVersion("7")

	back := Sibling(ours)
	if back == nil || !operatorLists(back, "home-v6", "2001:db8:b::/64") {
		t.Fatalf("handed back %v: the existing operator would not find it", back)
	}
	if back.GetResourceVersion() != "" || back.GetLabels()["dynamic-prefix.io/name"] != "home" {
		t.Errorf("metadata %v", back.Object["metadata"])
	}
	if cidr, _, _ := unstructured.NestedString(back.Object, "spec", "cidr"); cidr != "2001:db8:b::/64" {
		t.Errorf("spec %v", back.Object["spec"])
	}
	if Sibling(back) != nil || Sibling(parent) != nil {
		t.Error("the operator's own sibling and the annotated pool are not ours to replace")
	}
}

func TestOurAdvertisementIsReplacedByTheOneTheOperatorLooksUp(t *testing.T) {
	dp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "home", "uid": "u-1"}}}
	a, err := backends.RenderAdvertisement("home", model.Subnet{Name: "svc", Advertise: true, Community: "65000:100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ours := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement", "spec": a.Spec}}
	ours.SetName(a.Name)
	ours.SetLabels(a.Labels)
	back := Advertisement(ours, dp)
	if back == nil {
		t.Fatal("not handed back")
	}
	// What the existing operator reads: its name, its three labels, its
	// controller reference to the DynamicPrefix.
	l := back.GetLabels()
	if back.GetName() != "dp-home-svc" || len(l) != 3 || l["app.kubernetes.io/managed-by"] != "dynamic-prefix-operator" ||
		l["dynamic-prefix.io/name"] != "home" || l["dynamic-prefix.io/subnet"] != "svc" {
		t.Errorf("handed back %s %v", back.GetName(), l)
	}
	if o := back.GetOwnerReferences(); len(o) != 1 || o[0].UID != "u-1" || o[0].Controller == nil || !*o[0].Controller {
		t.Errorf("owners %v", o)
	}
	if !cmp.Equal(back.Object["spec"], ours.Object["spec"]) {
		t.Errorf("spec %v", back.Object["spec"])
	}
	if Advertisement(back, dp) != nil {
		t.Error("the operator's own advertisement is not ours to replace")
	}
}
