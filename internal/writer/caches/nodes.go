// The Node cache's shape: each Node kept as its name, our digest annotation
// (capped) and, when not Ready, since when (NodeView); a paged list keeps a
// slim copy of each (SlimNode). The ballot reads them as decide.Node
// (Caches.Nodes).

package caches

import (
	"strconv"
	"strings"
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

// DigestBytes is where the node cache keeps the size of a digest annotation
// it cut (capped), so that what reports it says how long it really is. Like
// NotReadySince it exists only in the writer's cache.
const DigestBytes = "renumber.internal/digest-bytes"

// NodeGVR is the Node resource.
var NodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// NodeView strips a Node (full or metadata only) to what the writer reads: its
// name, the digest and, when not Ready, since when. It is the Node cache's
// transform: kubelet's status updates then compare equal unless they change
// readiness.
func NodeView(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		out := api.Bare(m)
		if _, ok := m.Annotations[digest.Annotation]; ok {
			out.Annotations = map[string]string{}
			keepDigest(out.Annotations, m.Annotations)
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
	keepDigest(ann, n.Annotations)
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
	if _, ok := n.Annotations[digest.Annotation]; ok {
		out.Annotations = map[string]string{}
		keepDigest(out.Annotations, n.Annotations)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out
}

// keepDigest puts into ann what the cache keeps of the digest annotation in
// from: anyone who may patch a Node can write up to the API server's 256 KiB
// there, and a digest is at most digest.MaxBytes. A longer one is cut to one
// byte more, which keeps it too long to decode (it is reported garbled, with
// its real size beside it: DigestBytes); the writer never writes it back. A
// copy already cut (SlimNode) keeps the size it carries.
func keepDigest(ann, from map[string]string) {
	v, ok := from[digest.Annotation]
	if !ok {
		return
	}
	c, cut := capped(v)
	ann[digest.Annotation] = c
	switch {
	case cut:
		ann[DigestBytes] = strconv.Itoa(len(v))
	case len(v) == digest.MaxBytes+1 && from[DigestBytes] != "":
		ann[DigestBytes] = from[DigestBytes]
	}
}

// capped is v cut to digest.MaxBytes+1 bytes, and whether it was cut. The
// cut is a copy: a slice of v would keep all of v's bytes alive in the
// cache.
func capped(v string) (string, bool) {
	if len(v) > digest.MaxBytes+1 {
		return strings.Clone(v[:digest.MaxBytes+1]), true
	}
	return v, false
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
	bytes, _ := strconv.Atoi(m.Annotations[DigestBytes])
	return decide.Node{Name: m.Name, UID: string(m.UID), Digest: v, Bytes: bytes, Reported: reported, NotReadySince: m.Annotations[NotReadySince]}, true
}
