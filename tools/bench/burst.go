package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/renumber/renumber/internal/writer/permit"
	"github.com/renumber/renumber/tools/world"
)

// The renumbering burst: real renumberings in quick succession (a router
// that reboots twice, an ISP renumbering during a PD renewal storm) with
// every backend at once and the shipped write budget, while another client
// fights the writer over one pool. Each renumbering must reach every object
// with one write; the fight must stay throttled and reported.

type burst struct {
	At           string  `json:"measuredAt"`
	Renumberings int     `json:"renumberings"`
	Seconds      float64 `json:"seconds"`
	Objects      int     `json:"objectsFollowing"`
	// LatencyMS: router reconfigured -> every object holds the new prefix.
	LatencyMS []float64 `json:"latencyToEveryObjectMillis"`
	// WritesPer is the writer's writes per renumbering, by resource (not the
	// fought pool, not Leases or events); MostPerObject the most writes any
	// one object but the status took in one renumbering (the status also
	// reports the fight).
	WritesPer     map[string]float64 `json:"writesPerRenumbering"`
	MostPerObject int                `json:"mostWritesToOneObjectInOneRenumbering"`
	MostWritten   string             `json:"mostWrittenObject"`
	Fight         fight              `json:"fight"`
	// Without is the same run with --budget-decision-burst 0: every write
	// counts against the buckets, as before decisions were told apart.
	Without *burst `json:"withoutFreeDecisions,omitempty"`
}

type fight struct {
	Reverts      int64 `json:"reverts"`
	WriterWrites int   `json:"writerWritesToTheFoughtPool"`
	// Bound is what the budget allows the writer there: the free writes
	// (permit.FreeWrites) of each admitted decision, plus the object's
	// burst and rate over the run.
	Bound    int  `json:"budgetBound"`
	Reported bool `json:"reportedWriteBudgetExceeded"`
}

const (
	burstRenumberings = 10
	burstEvery        = 6 * time.Second
	burstHA           = 4 // HA Services, one of them on kube-vip
)

var (
	groupGVR            = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumcidrgroups"}
	metallbGVR          = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}
	calicoGVR           = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"}
	networkSetGVR       = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "networksets"}
	globalNetworkSetGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "globalnetworksets"}
	networkPolicyGVR    = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// runBurst runs the burst with the shipped budget, then without free
// decisions.
func runBurst(ctx context.Context) (*burst, error) {
	b, err := burstRun(ctx)
	if err != nil {
		return nil, err
	}
	b.Without, err = burstRun(ctx, "--budget-decision-burst", "0")
	return b, err
}

func burstRun(ctx context.Context, writerArgs ...string) (*burst, error) {
	agentBin, writerBin, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("burst: starting the world (1 node, every backend), writer flags %q", writerArgs)
	w, err := startWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	repo, err := world.RepoRoot()
	if err != nil {
		return nil, err
	}
	for _, install := range []func(context.Context) error{w.API.InstallCRDs, w.API.InstallRBAC, w.API.InstallMetalLB, w.API.InstallCalico,
		func(ctx context.Context) error {
			return w.API.Apply(ctx, filepath.Join(repo, "manifests", "kube-vip", "rbac.yaml"))
		}} {
		if err := install(ctx); err != nil {
			return nil, err
		}
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return nil, err
	}
	if err := burstWorkload(ctx, w); err != nil {
		return nil, err
	}
	if _, err := w.StartAgent(ctx, agentBin, w.Net.Nodes[0].Name); err != nil {
		return nil, err
	}
	// The shipped budget: what users run.
	if _, err := w.StartWriter(ctx, writerBin, "writer-a", append([]string{"--kube-vip-configmap", "kube-system/kubevip"}, writerArgs...)...); err != nil {
		return nil, err
	}
	if err := waitEveryObject(ctx, w, fresh(0), 2*time.Minute); err != nil {
		return nil, err
	}
	time.Sleep(settleWindow)

	// The fight: another client takes our entries out of pool "fought"
	// twice a second, for the whole run.
	var reverts atomic.Int64
	fightCtx, stopFight := context.WithCancel(ctx)
	defer stopFight()
	go func() {
		revert := []byte(`{"spec":{"blocks":[{"cidr":"198.51.100.0/24"}]}}`)
		for fightCtx.Err() == nil {
			if _, err := w.API.Dynamic.Resource(world.PoolGVR).Patch(fightCtx, "fought", types.MergePatchType, revert, metav1.PatchOptions{}); err == nil {
				reverts.Add(1)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()

	b := &burst{At: time.Now().UTC().Format(time.RFC3339), Renumberings: burstRenumberings, Objects: 8 + burstHA, WritesPer: map[string]float64{}}
	start := time.Now()
	m, err := w.API.Mark(ctx)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= burstRenumberings; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i-1) * burstEvery)))
		mi, err := w.API.Mark(ctx)
		if err != nil {
			return nil, err
		}
		cur, prev := fresh(i), fresh(i-1)
		t0 := time.Now()
		if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: cur, Valid: 30 * time.Minute, Preferred: 20 * time.Minute},
			world.Advert{Prefix: prev, Valid: 30 * time.Minute, Preferred: 0}); err != nil {
			return nil, err
		}
		if err := waitEveryObject(ctx, w, cur, 3*time.Minute); err != nil {
			return nil, err
		}
		lat := time.Since(t0)
		b.LatencyMS = append(b.LatencyMS, ms(lat))
		// What this renumbering wrote: until the next one starts (or, when
		// it took longer than that, until now).
		time.Sleep(time.Until(start.Add(time.Duration(i)*burstEvery)) - 200*time.Millisecond)
		ws, err := w.API.WritesSince(ctx, mi)
		if err != nil {
			return nil, err
		}
		per := map[string]int{}
		for _, wr := range world.Filter(ws, world.ByUser("system:serviceaccount:renumber-system:renumber-writer")) {
			if wr.Resource == "leases" || wr.Resource == "events" || wr.Name == "fought" {
				continue
			}
			b.WritesPer[wr.Resource] += 1.0 / burstRenumberings
			per[wr.Resource+" "+wr.Namespace+"/"+wr.Name]++
		}
		for o, n := range per {
			if n > b.MostPerObject && !strings.HasPrefix(o, "dynamicprefixes ") {
				b.MostPerObject, b.MostWritten = n, o
			}
		}
		progress("burst %d/%d: %s reached every object in %s, %d objects written", i, burstRenumberings, cur, lat.Round(time.Millisecond), len(per))
	}
	stopFight()
	b.Seconds = time.Since(start).Seconds()
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		return nil, err
	}
	for _, wr := range world.Filter(ws, world.ByUser("system:serviceaccount:renumber-system:renumber-writer")) {
		if wr.Resource == "ciliumloadbalancerippools" && wr.Name == "fought" {
			b.Fight.WriterWrites++
		}
	}
	b.Fight.Reverts = reverts.Load()
	b.Fight.Bound = 5 + int(2*b.Seconds/60+1)
	if len(writerArgs) == 0 {
		b.Fight.Bound += burstRenumberings * permit.FreeWrites // the free writes of each admitted decision
	}
	events, err := w.API.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, e := range events.Items {
		if e.Reason == "WriteBudgetExceeded" && e.InvolvedObject.Name == "fought" {
			b.Fight.Reported = true
		}
	}
	progress("burst: fight: %d reverts, %d writer writes to the fought pool (bound %d), reported %v", b.Fight.Reverts, b.Fight.WriterWrites, b.Fight.Bound, b.Fight.Reported)
	return b, nil
}

// burstWorkload: DynamicPrefix "home" (HA, a range "lb") followed by a
// Cilium pool, a CIDR group, a MetalLB pool, a Calico IPPool, the kube-vip
// ConfigMap and burstHA Services, each with a user entry; and pool "fought".
func burstWorkload(ctx context.Context, w *world.World) error {
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "metallb-system"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	home := map[string]any{"dynamic-prefix.io/name": "home"}
	objs := []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{dpGVR, map[string]any{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "metadata": map[string]any{"name": "home"},
			"spec": map[string]any{
				"acquisition":   map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
				"addressRanges": []any{map[string]any{"name": "lb", "start": "::d000:0:0:0", "end": "::dfff:ffff:ffff:ffff"}},
				"transition":    map[string]any{"mode": "ha"},
			}}},
		{world.PoolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "lb"}},
			"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}}}},
		{world.PoolGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": "fought", "annotations": home},
			"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": "198.51.100.0/24"}}}}},
		{groupGVR, map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup", "metadata": map[string]any{"name": "raw", "annotations": home},
			"spec": map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}}}},
		{metallbGVR, map[string]any{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
			"metadata": map[string]any{"name": "home", "namespace": "metallb-system", "annotations": home},
			"spec":     map[string]any{"addresses": []any{"192.0.2.10-192.0.2.20"}}}},
		{networkSetGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "NetworkSet",
			"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": home},
			"spec":     map[string]any{"nets": []any{"198.51.100.0/24"}}}},
		{globalNetworkSetGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "GlobalNetworkSet",
			"metadata": map[string]any{"name": "lan", "annotations": home},
			"spec":     map[string]any{"nets": []any{"198.51.100.0/24"}}}},
		{networkPolicyGVR, map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": map[string]any{"name": "lan", "namespace": "default", "annotations": home},
			"spec": map[string]any{"podSelector": map[string]any{}, "ingress": []any{map[string]any{"from": []any{
				map[string]any{"ipBlock": map[string]any{"cidr": fresh(0).String()}}, map[string]any{"podSelector": map[string]any{}}}}}}}},
		{calicoGVR, map[string]any{"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool", "metadata": map[string]any{"name": "home-v6", "annotations": home},
			"spec": map[string]any{"cidr": "2001:db8:ffff::/64", "blockSize": 122}}},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "kubevip", "namespace": "kube-system", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/kubevip-key": "cidr-global"}},
			"data": map[string]any{"cidr-global": "192.0.2.128/28"}}},
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o.obj}
		if _, err := w.API.Dynamic.Resource(o.gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", u.GetName(), err)
		}
	}
	for i := range burstHA {
		ann := map[string]string{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/suffix": fmt.Sprintf("::d000:0:0:%x", i+1),
			"dynamic-prefix.io/service-address-range": "lb", "dynamic-prefix.io/skip-external-dns-update": "true"}
		if i == 0 {
			ann["dynamic-prefix.io/lb-provider"] = "kube-vip"
		}
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ha-%d", i), Namespace: "default", Annotations: ann},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}}}}
		if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// waitEveryObject polls (every 50 ms) until every object following "home"
// holds p as its current entry.
func waitEveryObject(ctx context.Context, w *world.World, p netip.Prefix, limit time.Duration) error {
	base := strings.TrimSuffix(p.String(), "::/64")
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		last = missing(ctx, w, p, base)
		if last == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s never reached every object: %s (logs in %s)", p, last, w.Dir)
}

// missing names the first object that does not hold p yet ("" when all do).
func missing(ctx context.Context, w *world.World, p netip.Prefix, base string) string {
	get := func(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
		u, err := w.API.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return &unstructured.Unstructured{Object: map[string]any{}}
		}
		return u
	}
	lb := world.Blocks(get(world.PoolGVR, "", "lb"))
	group, _, _ := unstructured.NestedStringSlice(get(groupGVR, "", "raw").Object, "spec", "externalCIDRs")
	addrs, _, _ := unstructured.NestedStringSlice(get(metallbGVR, "metallb-system", "home").Object, "spec", "addresses")
	cidr, _, _ := unstructured.NestedString(get(calicoGVR, "", "home-v6").Object, "spec", "cidr")
	cm, _, _ := unstructured.NestedString(get(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "kube-system", "kubevip").Object, "data", "cidr-global")
	set, _, _ := unstructured.NestedStringSlice(get(networkSetGVR, "default", "lan").Object, "spec", "nets")
	global, _, _ := unstructured.NestedStringSlice(get(globalNetworkSetGVR, "", "lan").Object, "spec", "nets")
	rules, _, _ := unstructured.NestedSlice(get(networkPolicyGVR, "default", "lan").Object, "spec", "ingress")
	switch {
	case len(lb) < 2 || !strings.HasPrefix(lb[1], base+":d000::"):
		return fmt.Sprintf("pool lb %q", lb)
	case !slices.Contains(group, p.String()):
		return fmt.Sprintf("CIDR group %q", group)
	case !slices.Contains(addrs, p.String()):
		return fmt.Sprintf("MetalLB pool %q", addrs)
	case cidr != p.String():
		return "IPPool home-v6 " + cidr
	case !strings.Contains(cm, p.String()):
		return "kube-vip " + cm
	case !slices.Contains(set, p.String()):
		return fmt.Sprintf("NetworkSet %q", set)
	case !slices.Contains(global, p.String()):
		return fmt.Sprintf("GlobalNetworkSet %q", global)
	case len(rules) != 1 || !strings.Contains(fmt.Sprint(rules[0]), p.String()):
		return fmt.Sprintf("NetworkPolicy %v", rules)
	}
	for i := range burstHA {
		s, err := w.API.Client.CoreV1().Services("default").Get(ctx, fmt.Sprintf("ha-%d", i), metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		key := "lbipam.cilium.io/ips"
		if i == 0 {
			key = "kube-vip.io/loadbalancerIPs"
		}
		if !strings.Contains(s.Annotations[key], base+":d000::") {
			return fmt.Sprintf("Service ha-%d %q", i, s.Annotations[key])
		}
	}
	return ""
}

func writeBurst(b *strings.Builder, r *burst) {
	fmt.Fprintf(b, "\n## Renumbering burst (%d renumberings in %.0f s, measured %s)\n\n", r.Renumberings, r.Seconds, r.At)
	fmt.Fprintf(b, "A renumbering every %s with the shipped write budget, %d objects following one DynamicPrefix (a Cilium pool, a CIDR group, a MetalLB pool, a Calico IPPool with its draining sibling, a Calico NetworkSet and GlobalNetworkSet, a NetworkPolicy, the kube-vip ConfigMap, %d HA Services, one of them on kube-vip) and another client reverting a further pool twice a second.\n\n", burstEvery, r.Objects, burstHA)
	fmt.Fprintf(b, "| | p50 | p99 |\n|---|---|---|\n| router reconfigured -> every object holds the new prefix | %.0f ms | %.0f ms |\n\n",
		percentile(r.LatencyMS, 50), percentile(r.LatencyMS, 99))
	var keys []string
	for k := range r.WritesPer {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("| writer's writes per renumbering | |\n|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %.1f |\n", k, r.WritesPer[k])
	}
	fmt.Fprintf(b, "\nThe most writes one object (but the status) took in one renumbering: %d (%s; goal 1). The DynamicPrefix status is written a second time in a renumbering when its conditions report the fight (`PoolsSynced=False WriteBudgetExceeded` once the fought pool is throttled again): that write is the report, not the renumbering.\n\n", r.MostPerObject, r.MostWritten)
	fmt.Fprintf(b, "The fight: %d reverts; the writer wrote the fought pool %d times (the budget's bound: one per renumbering + burst 5 + 2/min = %d); reported with `WriteBudgetExceeded`: %v.\n",
		r.Fight.Reverts, r.Fight.WriterWrites, r.Fight.Bound, r.Fight.Reported)
	if o := r.Without; o != nil {
		fmt.Fprintf(b, "\nThe same run with `--budget-decision-burst 0` (every write counts against the buckets, as before the breaker told a renumbering from a storm, measured %s): every object reached in p50 %.0f ms, p99 %.0f ms; %.0f s for the %d renumberings; the fight: %d writer writes (bound %d), reported %v.\n",
			o.At, percentile(o.LatencyMS, 50), percentile(o.LatencyMS, 99), o.Seconds, o.Renumberings, o.Fight.WriterWrites, o.Fight.Bound, o.Fight.Reported)
	}
}
