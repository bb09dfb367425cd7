// The Node cache's shape: each Node kept as its name, our digest annotation
// (capped) and, when not Ready, since when (NodeView); a paged list keeps a
// slim copy of each (SlimNode). The ballot reads them as decide.Node
// (Caches.Nodes).

package caches

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/decide"
)

// NotReadySince is where the node cache keeps when a Node's Ready condition last
// turned False or Unknown. It exists only in the writer's cache, never in the API.
const NotReadySince = "renumber.internal/not-ready-since"

// NodeGVR is the Node resource.
var NodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// NodeView strips a Node (full or metadata only) to what the writer reads: its
// name, the digest and, when not Ready, since when. It is the Node cache's
// transform: kubelet's status updates then compare equal unless they change
// readiness.
func NodeView(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		out := api.Bare(m)
		if v, ok := m.Annotations[digest.Annotation]; ok {
			out.Annotations = map[string]string{digest.Annotation: capped(v)}
		}
		return out, nil
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	out.Name, out.ResourceVersion, out.UID = n.Name, n.ResourceVersion, n.UID
	ann := map[string]string{}
	if v, ok := n.Annotations[digest.Annotation]; ok {
		ann[digest.Annotation] = capped(v)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			ann[NotReadySince] = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
	}
	if len(ann) > 0 {
		out.Annotations = ann
	}
	return out, nil
}

// SlimNode is a copy of n with only what NodeView reads: name, version, UID, the
// digest annotation and the Ready condition. A real Node is kilobytes (images,
// addresses, capacity); its slim copy is a few hundred bytes.
func SlimNode(n *corev1.Node) corev1.Node {
	out := corev1.Node{TypeMeta: n.TypeMeta}
	out.Name, out.ResourceVersion, out.UID = n.Name, n.ResourceVersion, n.UID
	if v, ok := n.Annotations[digest.Annotation]; ok {
		out.Annotations = map[string]string{digest.Annotation: capped(v)}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out
}

// capped bounds what the cache keeps of a digest annotation: anyone who may
// patch a Node can write up to the API server's 256 KiB there, and a digest
// is at most digest.MaxBytes. One byte more keeps it too long to decode (it
// is reported garbled as before); the writer never writes it back.
func capped(v string) string {
	if len(v) > digest.MaxBytes {
		return v[:digest.MaxBytes+1]
	}
	return v
}

// NodeState is what of a NodeView the rule reads: a change of it is a reason for a pass.
func NodeState(o any) string {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return ""
	}
	v, ok := m.Annotations[digest.Annotation]
	if ok {
		v = "=" + v
	}
	return v + "|" + m.Annotations[NotReadySince]
}

// ballotNode is what the ballot reads of a NodeView.
func ballotNode(o any) (decide.Node, bool) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return decide.Node{}, false
	}
	v, reported := m.Annotations[digest.Annotation]
	return decide.Node{Name: m.Name, UID: m.UID, Digest: v, Reported: reported, NotReadySince: m.Annotations[NotReadySince]}, true
}
