package caches

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/decide"
)

func node(name, value string, ready corev1.ConditionStatus, since string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		digest.Annotation: value, "kubernetes.io/unrelated": "dropped"}}}
	if ready != "" {
		at, _ := time.Parse(time.RFC3339, since)
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(at)},
		}
	}
	return n
}

// The ballot reads a Node as the cache keeps it: its digest and, while it is
// not Ready, since when; nothing else of it.
func TestTheBallotReadsANodeAsTheCacheKeepsIt(t *testing.T) {
	const a = "v1;eth0=2001:db8:a::/64 p ra+addr"
	for _, tt := range []struct {
		node *corev1.Node
		want decide.Node
	}{
		{node("fresh", a, "", ""), decide.Node{Name: "fresh", Digest: a, Reported: true}},
		{node("ready", a, "True", "2026-11-21T10:00:00Z"), decide.Node{Name: "ready", Digest: a, Reported: true}},
		{node("flaky", a, "Unknown", "2026-11-21T11:58:00Z"), decide.Node{Name: "flaky", Digest: a, Reported: true, NotReadySince: "2026-11-21T11:58:00Z"}},
		{node("down", a, "False", "2026-11-21T11:50:00Z"), decide.Node{Name: "down", Digest: a, Reported: true, NotReadySince: "2026-11-21T11:50:00Z"}},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "silent"}}, decide.Node{Name: "silent"}},
	} {
		v, err := NodeView(tt.node)
		if err != nil {
			t.Fatal(err)
		}
		slim := SlimNode(tt.node)
		fromSlim, _ := NodeView(&slim)
		if !reflect.DeepEqual(v, fromSlim) {
			t.Errorf("%s: the view of its slim copy differs: %+v, %+v", tt.node.Name, fromSlim, v)
		}
		got, ok := ballotNode(v)
		if !ok || got != tt.want {
			t.Errorf("%s: the ballot reads %+v, want %+v", tt.node.Name, got, tt.want)
		}
	}
	// Kubelet's status updates change nothing the ballot reads.
	before, _ := NodeView(node("ready", a, "True", "2026-11-21T10:00:00Z"))
	after := node("ready", a, "True", "2026-11-21T10:00:00Z")
	after.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}}
	later, _ := NodeView(after)
	if NodeState(before) != NodeState(later) {
		t.Error("a status update that keeps readiness changes the node's state")
	}
}

// Anyone who may patch a Node can write up to 256 KiB into its digest
// annotation: the cache keeps at most one byte more than a digest may hold,
// and the digest is still reported garbled.
func TestTheCacheKeepsNoHugeDigest(t *testing.T) {
	huge := "v1;eth0=" + strings.Repeat("x", 256<<10)
	for name, o := range map[string]any{
		"a Node":       node("n1", huge, corev1.ConditionTrue, "2026-01-01T00:00:00Z"),
		"its metadata": &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{digest.Annotation: huge}}},
	} {
		v, err := NodeView(o)
		if err != nil {
			t.Fatal(err)
		}
		kept := v.(*metav1.PartialObjectMetadata).Annotations[digest.Annotation]
		if len(kept) != digest.MaxBytes+1 {
			t.Errorf("%s: the cache keeps %d bytes, want %d", name, len(kept), digest.MaxBytes+1)
		}
		if shares(kept, huge) {
			t.Errorf("%s: the kept value shares the annotation's bytes: all %d stay alive", name, len(huge))
		}
		if _, err := digest.Decode(kept); err == nil {
			t.Errorf("%s: the kept value decodes", name)
		}
		if n, _ := ballotNode(v); n.Bytes != len(huge) {
			t.Errorf("%s: the ballot reads its size as %d, want %d", name, n.Bytes, len(huge))
		}
	}
	slim := SlimNode(node("n1", huge, corev1.ConditionTrue, "2026-01-01T00:00:00Z"))
	if kept := slim.Annotations[digest.Annotation]; len(kept) != digest.MaxBytes+1 || shares(kept, huge) {
		t.Errorf("SlimNode keeps %d bytes (shared: %v)", len(kept), shares(kept, huge))
	}
	if v, _ := NodeView(&slim); v.(*metav1.PartialObjectMetadata).Annotations[DigestBytes] != strconv.Itoa(len(huge)) {
		t.Errorf("the view of the slim copy lost the digest's size: %v", v.(*metav1.PartialObjectMetadata).Annotations)
	}
}

// shares reports whether s lies in the bytes of whole: then whole stays
// alive as long as s does.
func shares(s, whole string) bool {
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(whole)))
	return p >= start && p < start+uintptr(len(whole))
}

// pagedNodes serves n Nodes by pages, as the API server does.
type pagedNodes struct {
	corev1client.NodeInterface
	nodes []corev1.Node
	calls []metav1.ListOptions
}

func (p *pagedNodes) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	p.calls = append(p.calls, o)
	start := 0
	if o.Continue != "" {
		fmt.Sscan(o.Continue, &start)
	}
	end := min(start+int(o.Limit), len(p.nodes))
	out := &corev1.NodeList{Items: p.nodes[start:end]}
	out.ResourceVersion = fmt.Sprint(100 + len(p.calls)) // a later page's version must not win
	if end < len(p.nodes) {
		out.Continue = fmt.Sprint(end)
	}
	return out, nil
}

func fatNode(i int) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), ResourceVersion: fmt.Sprint(i), UID: "u",
		Labels:      map[string]string{"kubernetes.io/hostname": "x"},
		Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}}
	if i%3 != 0 {
		n.Annotations[digest.Annotation] = "v1;eth0=2001:db8:a::/64 p ra"
	}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
	if i%2 == 0 {
		at := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, i, 0, time.UTC))
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: at})
	}
	return n
}

func TestNodesAreListedByPagesOfSlimNodes(t *testing.T) {
	p := &pagedNodes{}
	for i := range 1234 {
		p.nodes = append(p.nodes, fatNode(i))
	}
	list, err := slimNodes(t.Context(), p, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 3 || len(list.Items) != 1234 {
		t.Fatalf("%d requests, %d Nodes; want 3 pages of at most %d and every Node", len(p.calls), len(list.Items), page)
	}
	for _, c := range p.calls {
		if c.Limit != page || c.ResourceVersion != "" {
			t.Errorf("request %+v: want limit %d and a consistent read", c, page)
		}
	}
	if list.ResourceVersion != "101" {
		t.Errorf("list version %s, want the first page's (the snapshot the continue tokens read)", list.ResourceVersion)
	}
	for i := range list.Items {
		slimView, _ := NodeView(&list.Items[i])
		fatView, _ := NodeView(&p.nodes[i])
		if !reflect.DeepEqual(slimView, fatView) {
			t.Fatalf("node %d: the node rule sees %+v slim, %+v whole", i, slimView, fatView)
		}
		if len(list.Items[i].Status.Images) != 0 || list.Items[i].Labels != nil {
			t.Fatalf("node %d kept more than it needs: %+v", i, list.Items[i])
		}
	}
}
