package caches

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/decide"
)

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
		slimView, _ := decide.View(&list.Items[i])
		fatView, _ := decide.View(&p.nodes[i])
		if !reflect.DeepEqual(slimView, fatView) {
			t.Fatalf("node %d: the node rule sees %+v slim, %+v whole", i, slimView, fatView)
		}
		if len(list.Items[i].Status.Images) != 0 || list.Items[i].Labels != nil {
			t.Fatalf("node %d kept more than it needs: %+v", i, list.Items[i])
		}
	}
}
