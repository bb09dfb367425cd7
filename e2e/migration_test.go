package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
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

// operatorSibling is the name the existing operator gives the Calico IPPool
// it creates for a draining cidr of parent: the first 8 hex digits of the
// CIDR's SHA-256.
func operatorSibling(parent, cidr string) string {
	sum := sha256.Sum256([]byte(cidr))
	return parent + "-" + hex.EncodeToString(sum[:])[:8]
}

// installBackends installs the CRDs of every backend the existing operator
// writes, kube-vip's RBAC and MetalLB's namespace.
func installBackends(t *testing.T, w *world.World) {
	t.Helper()
	ctx := t.Context()
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(context.Context) error{w.API.InstallMetalLB, w.API.InstallCalico,
		func(ctx context.Context) error {
			return w.API.Apply(ctx, filepath.Join(repo, "manifests", "kube-vip", "rbac.yaml"))
		}} {
		if err := install(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func operatorObjects(t *testing.T, w *world.World) {
	t.Helper()
	ctx := t.Context()
	a, b := prefixA.String(), prefixB.String()
	at := func(m int) string {
		return time.Now().Add(time.Duration(m-60) * time.Minute).UTC().Format(time.RFC3339)
	}
	apply(t, w, api.GVR, map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": "home", "finalizers": []any{dynamicprefix.Finalizer}},
		"spec": map[string]any{
			"acquisition":   map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
			"subnets":       []any{map[string]any{"name": "svc", "offset": 1, "prefixLength": 112, "bgp": map[string]any{"advertise": true}}},
			"transition":    map[string]any{"mode": "ha"},
		},
	})
	dp := get(t, w, api.GVR, "home")
	dp.Object["status"] = map[string]any{
		"currentPrefix": b, "prefixSource": "router-advertisement", "leaseExpiresAt": at(50),
		"history": []any{map[string]any{"prefix": a, "acquiredAt": at(0), "deprecatedAt": at(20), "state": "draining"}},
		"conditions": []any{map[string]any{"type": "PrefixAcquired", "status": "True", "reason": "PrefixAcquired",
			"message": "Prefix acquired", "lastTransitionTime": at(20)}},
	}
	if _, err := w.API.Dynamic.Resource(api.GVR).UpdateStatus(ctx, dp, metav1.UpdateOptions{}); err != nil {
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
	// The subnet's pool, and the advertisement that operator created for
	// it (its name, labels and controller reference; the spec it builds).
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "svc", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "svc",
			"dynamic-prefix.io/managed-blocks": "cidr=" + subnetOf(b) + ",cidr=" + subnetOf(a)}},
		"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.128/25"},
			map[string]any{"cidr": subnetOf(b)}, map[string]any{"cidr": subnetOf(a)}}},
	})
	yes := true
	advert := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumBGPAdvertisement",
		"metadata": map[string]any{"name": "dp-home-svc", "labels": map[string]any{
			"app.kubernetes.io/managed-by": "dynamic-prefix-operator", "dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "svc"}},
		"spec": map[string]any{"advertisements": []any{map[string]any{
			"advertisementType": "Service", "service": map[string]any{"addresses": []any{"LoadBalancerIP"}}}}},
	}}
	advert.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "dynamic-prefix.io/v1alpha1", Kind: "DynamicPrefix",
		Name: "home", UID: dp.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	if _, err := w.API.Dynamic.Resource(advertGVR).Create(ctx, advert, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "home-net", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", dynamicprefix.AnnotationManagedCIDRs: b + "," + a}},
		"spec": map[string]any{"externalCIDRs": []any{"198.51.100.0/24", b, a}},
	})
	// MetalLB, Calico (its pool and the sibling it created for A) and
	// kube-vip, each with its own record key and a user entry.
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{addressPoolGVR, map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "home", "namespace": "metallb-system", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "lb",
				"dynamic-prefix.io/managed-addresses": rangeOf(b) + "," + rangeOf(a)}},
			"spec": map[string]any{"addresses": []any{"192.0.2.10-192.0.2.20", rangeOf(b), rangeOf(a)}}}},
		{ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": "home-v6", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/managed-cidr": b}},
			"spec": map[string]any{"cidr": b, "blockSize": 122, "allowedUses": []any{"Workload"}}}},
		{ippoolGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": operatorSibling("home-v6", a),
				"labels": map[string]any{"app.kubernetes.io/managed-by": "dynamic-prefix-operator",
					"dynamic-prefix.io/parent-pool": "home-v6", "dynamic-prefix.io/name": "home"},
				"annotations": map[string]any{"dynamic-prefix.io/last-sync": at(20)}},
			"spec": map[string]any{"cidr": a, "allowedUses": []any{"Workload"}}}},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "kubevip", "namespace": "kube-system", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/kubevip-key": "cidr-global",
				"dynamic-prefix.io/managed-kubevip-entries": b + "," + a}},
			"data": map[string]any{"cidr-global": "192.0.2.128/28," + b + "," + a, "range-default": "192.0.2.200-192.0.2.210"}}},
	} {
		u := &unstructured.Unstructured{Object: o.obj}
		if _, err := w.API.Dynamic.Resource(o.gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", u.GetName(), err)
		}
	}
	createService(t, w, "web", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:1",
		holdings.AnnotationIPs:         "192.0.2.7," + operatorAddr(b) + "," + operatorAddr(a),
		holdings.AnnotationManagedIPs:  operatorAddr(b) + "," + operatorAddr(a),
		holdings.AnnotationTargetAlpha: operatorAddr(b), holdings.AnnotationManagedTarget: operatorAddr(b),
	})
	// As its v0.0.18 and later write a Service: the target under both keys.
	api := func(p string) string { return strings.Replace(operatorAddr(p), "ffff:0:1", "ffff:0:2", 1) }
	createService(t, w, "api", map[string]string{
		"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: "::ffff:0:2",
		holdings.AnnotationIPs:         "192.0.2.9," + api(b) + "," + api(a),
		holdings.AnnotationManagedIPs:  api(b) + "," + api(a),
		holdings.AnnotationTargetAlpha: api(b), "external-dns.kubernetes.io/target": api(b),
		holdings.AnnotationManagedTarget: api(b),
	})
}

// TestSwitchingFromTheExistingOperator: renumber takes over a cluster whose
// objects the existing operator wrote, on every backend, as the README says
// (the old operator stopped, renumber started): one status write, and one
// write to the Service its v0.0.17 wrote (to add the GA DNS key; none to the
// one its v0.0.18 wrote, nor to any pool or advertisement); a renumbering
// then releases the entries that operator wrote once their prefix expires;
// the way back (kubectl renumber handover) leaves a status that operator
// reads right; deleting the DynamicPrefix releases it and its finalizer.
// Writes are counted from the audit log.
func TestSwitchingFromTheExistingOperator(t *testing.T) {
	w := newWorld(t, 2)
	installBackends(t, w)
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
	// The README's step 1: the shadow beside the old operator's objects plans
	// the switch; the switch then writes exactly what it planned.
	shadow := startShadow(t, w, "shadow", "--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)
	planned := settledPlan(t, shadow)
	m := mark(t, w)
	writer := startWriter(t, w, "writer-a", "--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)
	eventually(t, "the status is ours", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return condition(st, "PoolsSynced") == "True Synced", fmt.Sprint(st.Conditions)
	})
	settleWrites()
	switched := objectWrites(writesBy(t, w, m, writerUser))
	if want := []string{"patch dynamicprefixes/status home 200", "patch services web 200"}; !slices.Equal(switched, want) {
		t.Errorf("the switch wrote %q, want %q", switched, want)
	}
	if got := plannedWrites(planned); !slices.Equal(got, switched) {
		t.Errorf("the shadow planned %q, the switch wrote %q", got, switched)
	}
	if !slices.ContainsFunc(planned, func(c permit.Change) bool {
		return c.Object == "services/default/web" && c.Field == "metadata.annotations."+holdings.AnnotationTarget &&
			c.From == "" && c.To == operatorAddr(prefixB.String())
	}) {
		t.Errorf("the plan does not show web's GA target key from nothing to B's address: %+v", planned)
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
		return s.Annotations[holdings.AnnotationIPs] == want, fmt.Sprint(s.Annotations)
	})
	c, b := prefixC.String(), prefixB.String()
	backendsHold(t, w, "C current, B draining, A's entries gone",
		[]string{"192.0.2.10-192.0.2.20", rangeOf(c), rangeOf(b)},
		map[string]string{"home-v6": c, backends.CalicoSiblingName("home-v6", b): b + ", disabled"},
		"192.0.2.128/28,"+c+","+b)
	for key, want := range map[string]string{
		"dynamic-prefix.io/managed-blocks": "range=" + rangeOf(c) + ",range=" + rangeOf(b),
	} {
		if rec := get(t, w, poolGVR, "lb").GetAnnotations()[key]; rec != want {
			t.Errorf("pool record %s=%q: not in the existing operator's spelling", key, rec)
		}
	}
	settleWrites()
	perObject := objectWrites(writesBy(t, w, m, writerUser))
	if n := slices.Index(perObject, "delete ippools "+operatorSibling("home-v6", prefixA.String())+" 200"); n < 0 {
		t.Errorf("the operator's sibling for A was not deleted: %q", perObject)
	}
	if got := blocks(t, w, "svc"); !slices.Equal(got, []string{"192.0.2.128/25", subnetOf(c), subnetOf(b)}) {
		t.Errorf("the subnet's pool after C: %q", got)
	}
	for _, obj := range []string{"ciliumloadbalancerippools lb", "ciliumloadbalancerippools svc", "ciliumcidrgroups home-net", "services web", "services api",
		"ipaddresspools home", "configmaps kubevip", "ippools home-v6", "ippools " + backends.CalicoSiblingName("home-v6", b)} {
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
		"--kubeconfig", w.API.AdminFile, "--target-keys", holdings.AnnotationTargetAlpha)
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
	if _, ok := s.Annotations[holdings.AnnotationTarget]; ok {
		t.Errorf("the GA target key, which that operator (v0.0.17) never moves, is still there: %v", s.Annotations)
	}
	// B's IPPool is now the one that operator finds by its name and labels.
	backendsHold(t, w, "B's sibling handed back", []string{"192.0.2.10-192.0.2.20", rangeOf(c), rangeOf(b)},
		map[string]string{"home-v6": c, operatorSibling("home-v6", b): b + ", disabled"}, "192.0.2.128/28,"+c+","+b)
	if l := get(t, w, ippoolGVR, operatorSibling("home-v6", b)).GetLabels(); l["app.kubernetes.io/managed-by"] != "dynamic-prefix-operator" || l["dynamic-prefix.io/parent-pool"] != "home-v6" {
		t.Errorf("handed-back sibling labels %v", l)
	}
	// The advertisement is still the one that operator created: adopted,
	// never duplicated.
	if list, err := w.API.Dynamic.Resource(advertGVR).List(t.Context(), metav1.ListOptions{}); err != nil || len(list.Items) != 1 ||
		list.Items[0].GetName() != "dp-home-svc" || list.Items[0].GetLabels()["app.kubernetes.io/managed-by"] != "dynamic-prefix-operator" {
		t.Errorf("advertisements after the way back: %v %v", list, err)
	}

	// Back to renumber (the status, and web's GA key again: the handover
	// was to a v0.0.17 that writes the alpha key alone), then delete:
	// release, then the finalizer.
	m = mark(t, w)
	startWriter(t, w, "writer-b", "--kube-vip-configmap", backends.DefaultKubeVIPConfigMap)
	eventually(t, "the status is ours again", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return len(st.History) > 0 && st.History[0].Prefix == c && condition(st, "PoolsSynced") == "True Synced", fmt.Sprint(st.History)
	})
	settleWrites()
	if got, want := objectWrites(writesBy(t, w, m, writerUser)), []string{"patch dynamicprefixes/status home 200", "patch services api 200", "patch services web 200"}; !slices.Equal(got, want) {
		t.Errorf("switching again wrote %q, want %q", got, want)
	}
	if err := w.API.Dynamic.Resource(api.GVR).Delete(t.Context(), "home", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "home is gone", func() (bool, string) {
		_, err := w.API.Dynamic.Resource(api.GVR).Get(t.Context(), "home", metav1.GetOptions{})
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
	if s.Annotations[holdings.AnnotationIPs] != "192.0.2.7" {
		t.Errorf("web after delete: %v", s.Annotations)
	}
	if s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), "api", metav1.GetOptions{}); err != nil || s.Annotations[holdings.AnnotationIPs] != "192.0.2.9" {
		t.Errorf("api after delete: %v %v", s, err)
	}
	backendsHold(t, w, "the user's entries alone", []string{"192.0.2.10-192.0.2.20"},
		map[string]string{"home-v6": prefixC.String()}, "192.0.2.128/28")
	if got := blocks(t, w, "svc"); !slices.Equal(got, []string{"192.0.2.128/25"}) {
		t.Errorf("the subnet's pool after delete %q", got)
	}
	if list, err := w.API.Dynamic.Resource(advertGVR).List(t.Context(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("advertisements left after delete: %v %v", list, err)
	}
}

// backendsHold waits until the MetalLB pool, the Calico IPPools and the
// kube-vip key hold exactly what is given.
func backendsHold(t *testing.T, w *world.World, what string, metallb []string, ippoolsWant map[string]string, kubevipKey string) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		pool, err := w.API.Dynamic.Resource(addressPoolGVR).Namespace("metallb-system").Get(t.Context(), "home", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		addrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
		cm, err := w.API.Client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "kubevip", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := fmt.Sprintf("metallb %q, ippools %v, kube-vip %q", addrs, ippools(t, w), cm.Data["cidr-global"])
		want := fmt.Sprintf("metallb %q, ippools %v, kube-vip %q", metallb, ippoolsWant, kubevipKey)
		return got == want, got
	})
}

// settledPlan waits until the shadow at addr has planned something and its
// plan holds still for a few seconds, and returns it.
func settledPlan(t *testing.T, addr string) []permit.Change {
	t.Helper()
	var last string
	var out []permit.Change
	eventually(t, "the shadow's plan settles", func() (bool, string) {
		cs, err := planOf(addr)
		if err != nil {
			return false, err.Error()
		}
		now := fmt.Sprint(cs)
		settled := len(cs) > 0 && now == last
		last, out = now, cs
		time.Sleep(3 * time.Second)
		return settled, now
	})
	return out
}

// plannedWrites are the API writes a plan stands for, as objectWrites
// lists them: one per object (a status field is the status subresource).
func plannedWrites(cs []permit.Change) []string {
	var out []string
	for _, c := range cs {
		res, key, _ := strings.Cut(c.Object, "/")
		name := key[strings.LastIndex(key, "/")+1:]
		verb, code := "patch", 200
		switch {
		case strings.HasPrefix(c.Field, "status."):
			res += "/status"
		case c.Field == "(object)" && c.From == "":
			verb, code = "create", 201
		case c.Field == "(object)" && c.To == "":
			verb = "delete"
		}
		if w := fmt.Sprintf("%s %s %s %d", verb, res, name, code); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

func patchSpec(t *testing.T, w *world.World, spec map[string]any) {
	t.Helper()
	u := get(t, w, api.GVR, "home")
	for k, v := range spec {
		u.Object["spec"].(map[string]any)[k] = v
	}
	if _, err := w.API.Dynamic.Resource(api.GVR).Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
