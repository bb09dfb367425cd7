package e2e

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/tools/world"
)

// runCilium creates (or updates to image) the Cilium agent DaemonSet as
// Cilium's Helm chart names and labels it. Nothing runs it here: the writer
// reads only its image.
func runCilium(t *testing.T, w *world.World, image string) {
	t.Helper()
	labels := map[string]string{"k8s-app": "cilium"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cilium", Namespace: "kube-system", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "config", Image: image}},
					Containers:     []corev1.Container{{Name: "cilium-agent", Image: image}},
				},
			},
		},
	}
	client := w.API.Client.AppsV1().DaemonSets("kube-system")
	live, err := client.Get(t.Context(), "cilium", metav1.GetOptions{})
	if err != nil {
		_, err = client.Create(t.Context(), ds, metav1.CreateOptions{})
	} else {
		live.Spec = ds.Spec
		_, err = client.Update(t.Context(), live, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// publishManaged publishes, for each Service, the addresses of ours it asks
// for, as LB-IPAM would once it allocated them.
func publishManaged(t *testing.T, w *world.World, names ...string) {
	t.Helper()
	for _, name := range names {
		s, err := w.API.Client.CoreV1().Services("default").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		publish(t, w, name, holdings.Split(s.Annotations[holdings.AnnotationManagedIPs])...)
	}
}

// TestL2AnnouncerNudge: on a Cilium older than v1.20.1 (read from the image of
// its DaemonSet) each HA Service is touched once when its load balancer
// publishes a new address of ours, riding in the write that moves DNS when
// there is one; a Service's own annotations override. After Cilium is upgraded,
// nothing is nudged and the upgrade itself costs no write.
func TestL2AnnouncerNudge(t *testing.T) {
	w := newWorld(t, 1)
	ctx := t.Context()
	runCilium(t, w, "quay.io/cilium/cilium:v1.19.4@sha256:5e1bd2f4dc6d8b4b0c05b3a8c8f9e1d0a7f6e5d4c3b2a1908f7e6d5c4b3a2910")
	advertise(t, w, prefixA)
	createDP(t, w, "home", map[string]any{"transition": map[string]any{"mode": "ha"}})
	follow := func(host string, extra ...string) map[string]string {
		ann := map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationSuffix: host}
		for i := 0; i+1 < len(extra); i += 2 {
			ann[extra[i]] = extra[i+1]
		}
		return ann
	}
	createService(t, w, "web", follow("::ffff:0:1"))
	createService(t, w, "bare", follow("::ffff:0:2", holdings.AnnotationSkipDNS, "true"))
	createService(t, w, "opted-out", follow("::ffff:0:3", holdings.AnnotationSkipDNS, "true", holdings.AnnotationSkipL2Nudge, "true"))
	createService(t, w, "forced", follow("::ffff:0:4", holdings.AnnotationSkipDNS, "true", holdings.AnnotationForceL2Nudge, "true"))
	all := []string{"web", "bare", "opted-out", "forced"}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")

	// nudged waits until each Service's nudge record is what want says ("":
	// none) and its DNS target is on its first managed address (web).
	nudged := func(what string, want map[string]bool) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			for _, name := range all {
				s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				managed := s.Annotations[holdings.AnnotationManagedIPs]
				got, ok := s.Annotations[holdings.AnnotationL2Nudged]
				if want[name] && got != managed || !want[name] && ok {
					return false, fmt.Sprintf("%s: nudge %q, managed %q", name, got, managed)
				}
				if name == "web" && s.Annotations[holdings.AnnotationTarget] != holdings.Split(managed)[0] {
					return false, fmt.Sprintf("web: target %q, managed %q", s.Annotations[holdings.AnnotationTarget], managed)
				}
			}
			return true, ""
		})
	}
	asked := func(p fmt.Stringer) {
		t.Helper()
		eventually(t, "every Service asks for an address on "+p.String(), func() (bool, string) {
			for _, name := range all {
				s, err := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if ips := s.Annotations[holdings.AnnotationManagedIPs]; !strings.HasPrefix(ips, strings.TrimSuffix(p.String(), ":/64")) {
					return false, name + ": " + ips
				}
			}
			return true, ""
		})
	}
	old := map[string]bool{"web": true, "bare": true, "forced": true}
	perService := func(m world.Mark) map[string]int {
		t.Helper()
		out := map[string]int{}
		for _, wr := range serviceWrites(t, w, m) {
			out[strings.Fields(wr)[2]]++
		}
		return out
	}
	// inOrder says, on a failure, which writes the counts came from.
	inOrder := func(m world.Mark) string {
		var b strings.Builder
		for _, wr := range writesBy(t, w, m, writerUser) {
			if wr.Resource == "services" || wr.Resource == "dynamicprefixes" {
				fmt.Fprintf(&b, "\n\t%s %s", wr.At.Format("15:04:05.000"), wr)
			}
		}
		return b.String()
	}

	asked(prefixA)
	publishManaged(t, w, all...)
	nudged("nudges on the first published address", old)
	settleWrites()

	m := mark(t, w)
	advertise(t, w, prefixB, prefixA)
	asked(prefixB)
	publishManaged(t, w, all...)
	nudged("nudges on the new address", old)
	want := map[string]int{"web": 2, "bare": 2, "opted-out": 1, "forced": 2}
	if got := perService(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writes per Service for a renumbering on Cilium v1.19.4: %v, want %v (web's nudge rides with its DNS move); the writes:%s", got, want, inOrder(m))
	}

	m = mark(t, w)
	runCilium(t, w, "quay.io/cilium/cilium:v1.20.1")
	if got := perService(m); len(got) != 0 {
		t.Errorf("upgrading Cilium made the writer write %v", got)
	}
	before := map[string]string{}
	for _, name := range all {
		s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		before[name] = s.Annotations[holdings.AnnotationL2Nudged]
	}
	m = mark(t, w)
	advertise(t, w, prefixC, prefixB)
	asked(prefixC)
	publishManaged(t, w, all...)
	eventually(t, "forced nudged on C", func() (bool, string) {
		s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, "forced", metav1.GetOptions{})
		got := s.Annotations[holdings.AnnotationL2Nudged]
		return got == s.Annotations[holdings.AnnotationManagedIPs], got
	})
	want = map[string]int{"web": 2, "bare": 1, "opted-out": 1, "forced": 2}
	if got := perService(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("writes per Service for a renumbering on Cilium v1.20.1: %v, want %v (only the forced one nudged); the writes:%s", got, want, inOrder(m))
	}
	for _, name := range all {
		if name == "forced" {
			continue
		}
		s, _ := w.API.Client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if got := s.Annotations[holdings.AnnotationL2Nudged]; got != before[name] {
			t.Errorf("%s nudged on Cilium v1.20.1: %q -> %q", name, before[name], got)
		}
	}
	if n := countLog(w, "writer-a.log", "need no L2 announcer nudge"); n != 1 {
		t.Errorf("%d log lines for the upgrade, want 1", n)
	}
}

// TestWriterWithoutTheCiliumRole: a writer that may not read Cilium's
// DaemonSet (the Role in kube-system left out) still starts, leads and keeps
// the pools, and says why once (the version then counts as unknown: nudge,
// TestL2NudgeWhileTheDaemonSetCannotBeRead).
func TestWriterWithoutTheCiliumRole(t *testing.T) {
	w := homeWorld(t, 1)
	if err := w.API.Client.RbacV1().RoleBindings("kube-system").Delete(t.Context(), "renumber-writer-cilium", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, w, "node1")
	startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	waitLog(t, w, "writer-a.log", "cannot read the Cilium DaemonSet", 1)
}
