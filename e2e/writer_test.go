package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

const writerUser = "system:serviceaccount:renumber-system:renumber-writer"

var (
	poolGVR  = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumloadbalancerippools"}
	groupGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumcidrgroups"}
	prefixC  = netipPrefix("2001:db8:3:300::/64")
)

// writerArgs are test timings: a shorter lease than production so a killed
// leader is replaced within the test; the production defaults are 60/40/5 s.
var writerArgs = []string{"--lease-duration", "12s", "--renew-deadline", "8s", "--retry-period", "2s"}

func startWriter(t *testing.T, w *world.World, name string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append(append([]string{"--log-level", "debug"}, writerArgs...), extra...)
	cmd, err := w.StartWriter(t.Context(), filepath.Join(binaries(t), "writer"), name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// apply creates obj as the admin. A policy whose param kind is another
// project's fails every request it matches while the API server resolves
// that kind again (after a CRD is installed: a loaded fresh-clone run met
// it 30 s into a world); the admin's create is retried through that, as
// kubectl's user would retry it.
func apply(t *testing.T, w *world.World, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	var err error
	eventually(t, "creating "+u.GetName(), func() (bool, string) {
		_, err = w.API.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{})
		return err == nil || !strings.Contains(err.Error(), "failed to configure policy"), errString(err)
	})
	if err != nil {
		t.Fatalf("creating %s: %v", u.GetName(), err)
	}
}

func get(t *testing.T, w *world.World, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := w.API.Dynamic.Resource(gvr).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func blocks(t *testing.T, w *world.World, name string) []string {
	return world.Blocks(get(t, w, poolGVR, name))
}

func cidrs(t *testing.T, w *world.World, name string) []string {
	u := get(t, w, groupGVR, name)
	out, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "externalCIDRs")
	return out
}

func dpStatus(t *testing.T, w *world.World, name string) api.Status {
	dp, err := api.FromUnstructured(get(t, w, api.GVR, name))
	if err != nil {
		t.Fatal(err)
	}
	return dp.Status
}

func rangeOf(p string) string { return world.RangeOf(p) }

func subnetOf(p string) string { return strings.TrimSuffix(p, "::/64") + "::1:0/112" }

// ours counts the writer's writes other than Lease renewals and events.
func objectWrites(ws []world.Write) []string {
	var out []string
	for _, w := range ws {
		if w.Resource == "leases" || w.Resource == "events" {
			continue
		}
		res := w.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s %s %d", w.Verb, res, w.Name, w.Code))
	}
	slices.Sort(out)
	return out
}

func TestWriterFollowsThePrefix(t *testing.T) {
	w := newWorld(t, 3)
	ctx := t.Context()
	nodes := []string{"node1", "node2", "node3"}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: prefixA, Valid: 30 * time.Second, Preferred: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	createDP(t, w, "home", map[string]any{
		"addressRanges": []any{map[string]any{"name": "lb", "start": "::f000:0:0:0", "end": "::ffff:ffff:ffff:ffff"}},
		"subnets":       []any{map[string]any{"name": "svc", "offset": 1, "prefixLength": 112}},
	})
	userBlocks := []any{map[string]any{"cidr": "192.0.2.0/24"}, map[string]any{"cidr": "2001:db8:ffff::/64"}}
	apply(t, w, poolGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
		"metadata": map[string]any{"name": "lb", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "lb"}},
		"spec": map[string]any{"blocks": userBlocks},
	})
	apply(t, w, groupGVR, map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumCIDRGroup",
		"metadata": map[string]any{"name": "svc", "annotations": map[string]any{
			"dynamic-prefix.io/name": "home", "dynamic-prefix.io/subnet": "svc"}},
		"spec": map[string]any{"externalCIDRs": []any{"198.51.100.0/24"}},
	})
	for _, n := range nodes {
		startAgent(t, w, n)
	}
	writers := map[string]*exec.Cmd{"writer-a": startWriter(t, w, "writer-a"), "writer-b": startWriter(t, w, "writer-b")}

	converged := func(current string, pooled ...string) {
		t.Helper()
		wantBlocks := []string{"192.0.2.0/24", "2001:db8:ffff::/64"}
		wantCIDRs := []string{"198.51.100.0/24"}
		for _, p := range pooled {
			wantBlocks = append(wantBlocks, rangeOf(p))
			wantCIDRs = append(wantCIDRs, subnetOf(p))
		}
		eventually(t, "pools follow "+current, func() (bool, string) {
			b, c, st := blocks(t, w, "lb"), cidrs(t, w, "svc"), dpStatus(t, w, "home")
			return slices.Equal(b, wantBlocks) && slices.Equal(c, wantCIDRs) && st.CurrentPrefix == current,
				fmt.Sprintf("blocks %v cidrs %v current %q", b, c, st.CurrentPrefix)
		})
	}
	converged(prefixA.String(), prefixA.String())
	st := dpStatus(t, w, "home")
	if len(st.AddressRanges) != 1 || st.AddressRanges[0].CIDR != "2001:db8:1:100:f000::/68" || st.PrefixSource != "router-advertisement" {
		t.Errorf("status = %+v", st)
	}
	settleWrites()

	t.Run("quiet for 60 s: only the leader's Lease renewals", func(t *testing.T) {
		m := mark(t, w)
		time.Sleep(60 * time.Second)
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		var renewals int
		for _, wr := range ws {
			switch {
			case wr.User == writerUser && wr.Resource == "leases" && wr.Verb == "update":
				renewals++
			default:
				t.Errorf("write at steady state: %s", wr)
			}
		}
		// One renewal per 2 s retry period: 30 in 60 s, give or take the window's
		// edges and the renewal's own round trip.
		if renewals < 20 || renewals > 31 {
			t.Errorf("%d Lease renewals in 60 s with a 2 s retry period, want about 30", renewals)
		}
	})

	t.Run("prefix change: minimal writes, old entries retained, user entries untouched", func(t *testing.T) {
		m := mark(t, w)
		if err := w.Net.Router.Advertise(ctx,
			world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 300 * time.Second},
			world.Advert{Prefix: prefixA, Valid: 30 * time.Second, Preferred: 0},
		); err != nil {
			t.Fatal(err)
		}
		converged(prefixB.String(), prefixB.String(), prefixA.String())
		settleWrites()
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		onePatchPerNode(t, world.Filter(ws, world.ByUser(agentUser)), nodes...)
		got := objectWrites(world.Filter(ws, world.ByUser(writerUser)))
		want := []string{"patch ciliumcidrgroups svc 200", "patch ciliumloadbalancerippools lb 200", "patch dynamicprefixes/status home 200"}
		if !slices.Equal(got, want) {
			t.Errorf("writer object writes:\n got %q\nwant %q", got, want)
		}
		h := dpStatus(t, w, "home").History
		if len(h) != 2 || h[1].Prefix != prefixA.String() || h[1].State != "draining" || h[1].ExpiresAt == nil {
			t.Errorf("history = %+v, want A draining with a deadline", h)
		}
	})

	t.Run("garbled digest on one node: ignored, others unaffected", func(t *testing.T) {
		m := mark(t, w)
		patch := []byte(`{"metadata":{"annotations":{"` + digest.Annotation + `":"v1;eth0=::/0 p ra;<script>"}}}`)
		if _, err := w.API.Client.CoreV1().Nodes().Patch(ctx, "node3", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, w, "InvalidDigest", "node3")
		settleWrites()
		ws, _ := w.API.WritesSince(ctx, m)
		if got := objectWrites(world.Filter(ws, world.ByUser(writerUser))); len(got) != 0 {
			t.Errorf("a garbled digest caused writes: %v", got)
		}
	})

	t.Run("invalid pool reference: event and condition, no write; a fix heals it", func(t *testing.T) {
		apply(t, w, poolGVR, map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": "bad", "annotations": map[string]any{
				"dynamic-prefix.io/name": "home", "dynamic-prefix.io/address-range": "nope"}},
			"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.128/25"}}},
		})
		waitEvent(t, w, "InvalidPoolReference", "bad")
		eventually(t, "Degraded condition", func() (bool, string) {
			for _, c := range dpStatus(t, w, "home").Conditions {
				if c.Type == "Degraded" {
					return c.Status == "True" && c.Reason == "PoolError", c.Reason
				}
			}
			return false, "no condition"
		})
		if b := blocks(t, w, "bad"); !slices.Equal(b, []string{"192.0.2.128/25"}) {
			t.Errorf("invalid pool was written: %v", b)
		}
		fix := []byte(`{"metadata":{"annotations":{"dynamic-prefix.io/address-range":"lb"}}}`)
		if _, err := w.API.Dynamic.Resource(poolGVR).Patch(ctx, "bad", types.MergePatchType, fix, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "fixed pool filled", func() (bool, string) {
			b := blocks(t, w, "bad")
			return slices.Equal(b, []string{"192.0.2.128/25", rangeOf(prefixB.String()), rangeOf(prefixA.String())}), fmt.Sprint(b)
		})
	})

	t.Run("rolling restart of both writers: no writes beyond the Lease", func(t *testing.T) {
		settleWrites()
		m := mark(t, w)
		for _, name := range []string{"writer-a", "writer-b"} {
			w.Stop(writers[name], 10*time.Second) // SIGTERM: the leader releases its lease
			writers[name] = startWriter(t, w, name)
			waitLog(t, w, name+".log", "writer started", 2)
		}
		eventually(t, "a leader again", func() (bool, string) {
			l, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", ""
		})
		settleWrites()
		ws, _ := w.API.WritesSince(ctx, m)
		if got := objectWrites(world.Filter(ws, world.ByUser(writerUser))); len(got) != 0 {
			t.Errorf("handover with nothing changed wrote: %v", got)
		}
	})

	t.Run("invalid spec: condition and event, pools untouched", func(t *testing.T) {
		before := blocks(t, w, "lb")
		bad := []byte(`{"spec":{"addressRanges":[{"name":"lb","start":"::ffff:0:0:0","end":"::f000:0:0:0"}]}}`)
		if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, bad, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, w, "InvalidSpec", "home")
		eventually(t, "Degraded InvalidSpec", func() (bool, string) {
			for _, c := range dpStatus(t, w, "home").Conditions {
				if c.Type == "Degraded" {
					return c.Status == "True" && c.Reason == "InvalidSpec", c.Reason
				}
			}
			return false, ""
		})
		if after := blocks(t, w, "lb"); !slices.Equal(before, after) {
			t.Errorf("pool changed under an invalid spec: %v -> %v", before, after)
		}
		good := []byte(`{"spec":{"addressRanges":[{"name":"lb","start":"::f000:0:0:0","end":"::ffff:ffff:ffff:ffff"}]}}`)
		if _, err := w.API.Dynamic.Resource(api.GVR).Patch(ctx, "home", types.MergePatchType, good, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "healed", func() (bool, string) {
			for _, c := range dpStatus(t, w, "home").Conditions {
				if c.Type == "Degraded" {
					return c.Status == "False", c.Reason
				}
			}
			return false, ""
		})
	})

	t.Run("removing dynamic-prefix.io/name releases the pool", func(t *testing.T) {
		release := []byte(`{"metadata":{"annotations":{"dynamic-prefix.io/name":null}}}`)
		if _, err := w.API.Dynamic.Resource(poolGVR).Patch(ctx, "bad", types.MergePatchType, release, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "released", func() (bool, string) {
			u := get(t, w, poolGVR, "bad")
			_, rec := u.GetAnnotations()[dynamicprefix.AnnotationManagedBlock]
			b := blocks(t, w, "bad")
			return !rec && slices.Equal(b, []string{"192.0.2.128/25"}), fmt.Sprint(b)
		})
	})

	t.Run("leader killed: the standby takes over and applies a change made meanwhile", func(t *testing.T) {
		lease, err := w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		leader := *lease.Spec.HolderIdentity
		_ = writers[leader].Process.Kill() // SIGKILL: no release, the lease must expire
		if err := w.Net.Router.Advertise(ctx,
			world.Advert{Prefix: prefixC, Valid: 600 * time.Second, Preferred: 300 * time.Second},
			world.Advert{Prefix: prefixB, Valid: 600 * time.Second, Preferred: 0},
		); err != nil {
			t.Fatal(err)
		}
		eventually(t, "standby converges on C", func() (bool, string) {
			st := dpStatus(t, w, "home")
			b := blocks(t, w, "lb")
			return st.CurrentPrefix == prefixC.String() && slices.Contains(b, rangeOf(prefixC.String())), st.CurrentPrefix
		})
		lease, _ = w.API.Client.CoordinationV1().Leases(world.Namespace).Get(ctx, "renumber-writer", metav1.GetOptions{})
		if *lease.Spec.HolderIdentity == leader {
			t.Errorf("lease still held by the killed %s", leader)
		}
	})
}

func waitEvent(t *testing.T, w *world.World, reason, name string) {
	t.Helper()
	eventually(t, "event "+reason+" for "+name, func() (bool, string) {
		evs, err := w.API.Client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
}

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
