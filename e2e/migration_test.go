package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/service"
	"github.com/renumber/renumber/tools/world"
)

// The existing operator's objects, as it writes them (compat.md "Ownership
// records"; its status and finalizer as its controller writes them) after it
// followed "home" from A to B: never renumber's own writes standing in for it.

// operatorAddr is the Service web's address (suffix ::ffff:0:1) on p, in
// canonical form as that operator writes addresses.
func operatorAddr(p string) string {
	return netip.MustParseAddr(strings.TrimSuffix(p, "::/64") + "::ffff:0:1").String()
}

func operatorObjects(t *testing.T, w *world.World) {
	t.Helper()
	ctx := t.Context()
	a, b := prefixA.String(), prefixB.String()
	at := func(m int) string {
		return time.Now().Add(time.Duration(m-60) * time.Minute).UTC().Format(time.RFC3339)
	}
	apply(t, w, dynamicprefix.GVR, map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "home", "finalizers": []any{dynamicprefix.Finalizer}},
		"spec": map[string]any{
			"acquisition":   map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
			"transition":    map[string]any{"mode": "ha"},
		},
	})
	dp := get(t, w, dynamicprefix.GVR, "home")
	dp.Object["status"] = map[string]any{
		"currentPrefix": b, "prefixSource": "router-advertisement", "leaseExpiresAt": at(50),
		"history": []any{map[string]any{"prefix": a, "acquiredAt": at(0), "deprecatedAt": at(20), "state": "draining"}},
		"conditions": []any{map[string]any{"type": "PrefixAcquired", "status": "True", "reason": "PrefixAcquired",
			"message": "Prefix acquired", "lastTransitionTime": at(20)}},
	}
	if _, err := w.API.Dynamic.Resource(dynamicprefix.GVR).UpdateStatus(ctx, dp, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rng := func(p string) map[string]any {
		first, last, _ := strings.Cut(rangeOf(p), "-")
		return map[string]any{"start": first, "stop": last}
	}
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "lb",
			dynamicprefix.AnnotationManagedBlock: "range=" + rangeOf(b) + ",range=" + rangeOf(a)}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}, rng(b), rng(a)}},
	})
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "home-net", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", dynamicprefix.AnnotationManagedCIDRs: b + "," + a}},
		"spec": map[string]any{"externalCIDRs": []any{"198.51.100.0/24", b, a}},
	})
	createService(t, w, "web", map[string]string{
		"dynamic-prefix.io/name": "home", service.AnnotationSuffix: "::ffff:0:1",
		service.AnnotationIPs:         "192.0.2.7," + operatorAddr(b) + "," + operatorAddr(a),
		service.AnnotationManagedIPs:  operatorAddr(b) + "," + operatorAddr(a),
		service.AnnotationTargetAlpha: operatorAddr(b), service.AnnotationManagedTarget: operatorAddr(b),
	})
}

// TestSwitchingFromTheExistingOperator: renumber takes over a cluster whose
// objects the existing operator wrote, as the README says (the old operator
// stopped, renumber started): one status write and no other; a renumbering
// then releases the entries that operator wrote once their prefix expires;
// the way back (kubectl renumber handover) leaves a status that operator
// reads right; deleting the DynamicPrefix releases it and its finalizer.
// Writes are counted from the audit log.
func TestSwitchingFromTheExistingOperator(t *testing.T) {
	w := newWorld(t, 2)
	advertise(t, w, prefixB, prefixA)
	operatorObjects(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
		waitDigest(t, w, n, "B preferred, A deprecated", func(d digest.Node) bool {
			b, okB := find(d, prefixB)
			a, okA := find(d, prefixA)
			return okB && okA && !b.Deprecated && a.Deprecated
		})
	}
	settleWrites()
	m := mark(t, w)
	writer := startWriter(t, w, "writer-a")
	eventually(t, "the status is ours", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, "PoolsSynced") == "True Synced", fmt.Sprint(st.Conditions)
	})
	settleWrites()
	if got, want := objectWrites(writesBy(t, w, m, writerUser)), []string{"patch dynamicprefixes/status home 200", "patch services web 200"}; !slices.Equal(got, want) {
		t.Errorf("the switch wrote %q, want %q", got, want)
	}
	st := dpStatus(t, w, "home")
	if st.LeaseExpiresAt != nil || len(st.History) != 2 || st.History[1].Prefix != prefixA.String() ||
		st.History[1].DeprecatedAt == nil || st.History[0].AcquiredAt == nil ||
		time.Since(st.History[0].AcquiredAt.Time) < 30*time.Minute {
		t.Errorf("status after the switch: lease %v history %+v (the operator's timestamps must stay)", st.LeaseExpiresAt, st.History)
	}

	// A renumbering: C current, B draining. A's valid lifetime cannot run
	// out within a test (the kernel keeps a SLAAC address two hours), so
	// the count ends its drain: maxPrefixHistory 1.
	patchSpec(t, w, map[string]any{"transition": map[string]any{"mode": "ha", "maxPrefixHistory": 1}})
	m = mark(t, w)
	advertise(t, w, prefixC, prefixB, prefixA)
	eventually(t, "the pool follows C and A's blocks are gone", func() (bool, string) {
		got := blocks(t, w, "lb")
		return slices.Equal(got, []string{"192.0.2.0/24", rangeOf(prefixC.String()), rangeOf(prefixB.String())}), fmt.Sprint(got)
	})
	eventually(t, "the CIDR group follows C", func() (bool, string) {
		got := cidrs(t, w, "home-net")
		return slices.Equal(got, []string{"198.51.100.0/24", prefixC.String(), prefixB.String()}), fmt.Sprint(got)
	})
	eventually(t, "web follows C", func() (bool, string) {
		s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		want := "192.0.2.7," + operatorAddr(prefixC.String()) + "," + operatorAddr(prefixB.String())
		return s.Annotations[service.AnnotationIPs] == want, fmt.Sprint(s.Annotations)
	})
	if rec := get(t, w, poolGVR, "lb").GetAnnotations()[dynamicprefix.AnnotationManagedBlock]; rec != "range="+rangeOf(prefixC.String())+",range="+rangeOf(prefixB.String()) {
		t.Errorf("pool record %q: not in the existing operator's spelling", rec)
	}
	settleWrites()
	perObject := objectWrites(writesBy(t, w, m, writerUser))
	for _, obj := range []string{"ciliumloadbalancerippools lb", "ciliumcidrgroups home-net", "services web"} {
		n := 0
		for _, wr := range perObject {
			if strings.Contains(wr, " "+obj+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s written %d times for one renumbering (%q)", obj, n, perObject)
		}
	}

	// The way back: stop renumber, hand over, and read the status as the
	// existing operator does (current + the first maxPrefixHistory entries).
	w.Stop(writer, 5*time.Second)
	cmd := exec.CommandContext(t.Context(), filepath.Join(binaries(t), "kubectl-renumber"), "handover",
		"--kubeconfig", w.API.AdminFile, "--target-keys", service.AnnotationTargetAlpha)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("handover: %v\n%s", err, out)
	}
	st = dpStatus(t, w, "home")
	if len(st.History) != 1 || st.History[0].Prefix != prefixB.String() || st.History[0].State != "draining" {
		t.Errorf("handed-over history %+v, want B draining alone (what the operator pools with C)", st.History)
	}
	s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Annotations[service.AnnotationTarget]; ok {
		t.Errorf("the GA target key, which that operator (v0.0.17) never moves, is still there: %v", s.Annotations)
	}

	// Back to renumber, then delete: release, then the finalizer.
	startWriter(t, w, "writer-b")
	settleWrites()
	if err := w.API.Dynamic.Resource(dynamicprefix.GVR).Delete(t.Context(), "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "home is gone", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(dynamicprefix.GVR).Get(t.Context(), "home", metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
	if got := blocks(t, w, "lb"); !slices.Equal(got, []string{"192.0.2.0/24"}) {
		t.Errorf("pool after delete %q: the user's block alone", got)
	}
	if got := cidrs(t, w, "home-net"); !slices.Equal(got, []string{"198.51.100.0/24"}) {
		t.Errorf("CIDR group after delete %q", got)
	}
	s, err = w.API.Client.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[service.AnnotationIPs] != "192.0.2.7" {
		t.Errorf("web after delete: %v", s.Annotations)
	}
}

func patchSpec(t *testing.T, w *world.World, spec map[string]any) {
	t.Helper()
	u := get(t, w, dynamicprefix.GVR, "home")
	for k, v := range spec {
		u.Object["spec"].(map[string]any)[k] = v
	}
	if _, err := w.API.Dynamic.Resource(dynamicprefix.GVR).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
