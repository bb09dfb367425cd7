package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/aggregate"
)

// notReadySince is where the node cache keeps when a Node's Ready condition last
// turned False or Unknown. It exists only in the writer's cache, never in the API.
const notReadySince = "renumber.internal/not-ready-since"

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// The node rule: a Node's digest votes while the Node exists and is Ready, or has
// not been Ready for less than Config.NodeGrace. A Node with no Ready condition
// (no kubelet has reported yet) votes. A Node gone NotReady past the grace stops
// voting: the prefixes only it reported drain, and the current prefix stays
// unless the nodes still voting choose another. A deleted Node stops voting at
// once. An agent that died on a Ready node leaves its last digest voting; its
// deprecated prefixes still expire by their deadlines (status.history[].expiresAt).

// watchNodes caches each Node as its name, our annotation and, when not Ready,
// since when. Kubelet's status updates (every few minutes per node) are
// compared on those fields only and cost no pass. With the node rule off
// (NodeGrace 0) only metadata is watched.
func (r *Reconciler) watchNodes() *watched {
	return newWatched("nodes", nodesGVR, func() cache.SharedIndexInformer {
		var inf cache.SharedIndexInformer
		if r.cfg.NodeGrace > 0 && r.core != nil {
			// Typed (protobuf) Nodes: decoded into maps, 5,000 Nodes took the
			// writer to 133 MiB RSS; typed, 59 MiB (tools/bench, scale).
			nodes := r.core.Nodes()
			inf = plainInformer(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nodes.List(ctx, o) },
				nodes.Watch, &corev1.Node{})
		} else {
			inf = metadataInformer(r.meta, nodesGVR)
		}
		_ = inf.SetTransform(nodeView)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { r.enqueueAll(r.cfg.Debounce) },
			UpdateFunc: func(old, new any) {
				if nodeState(old) != nodeState(new) {
					r.enqueueAll(r.cfg.Debounce)
				}
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				r.mu.Lock()
				delete(r.decoded, metaName(o))
				delete(r.lapsed, metaName(o))
				r.mu.Unlock()
				r.enqueueAll(r.cfg.Debounce)
			},
		})
		return inf
	})
}

// nodeView strips a Node (full or metadata only) to what the writer reads.
func nodeView(o any) (any, error) {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		out := bare(m)
		if v, ok := m.Annotations[digest.Annotation]; ok {
			out.Annotations = map[string]string{digest.Annotation: v}
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
		ann[digest.Annotation] = v
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			ann[notReadySince] = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
	}
	if len(ann) > 0 {
		out.Annotations = ann
	}
	return out, nil
}

func nodeState(o any) string {
	if m, ok := o.(*metav1.PartialObjectMetadata); ok {
		return digestOf(o) + "|" + m.Annotations[notReadySince]
	}
	return ""
}

type decoded struct {
	value string
	node  digest.Node
	err   error
}

// decode decodes a node's digest, once per value.
func (r *Reconciler) decode(node, value string) (digest.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.decoded[node]; ok && d.value == value {
		return d.node, d.err
	}
	n, err := digest.Decode(value)
	r.decoded[node] = decoded{value: value, node: n, err: err}
	return n, err
}

// reports returns the digests that vote at now (see the node rule), reporting
// garbled ones and lapsed nodes once, and when the next vote lapses (zero if
// none will).
func (r *Reconciler) reports(now time.Time) ([]aggregate.Report, time.Time) {
	var out []aggregate.Report
	var wake time.Time
	for _, o := range r.nodes.store().List() {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		v, ok := m.Annotations[digest.Annotation]
		if !ok {
			continue
		}
		lapse, notReady := r.lapse(m, now)
		if r.noteLapse(m.Name, notReady && !now.Before(lapse)) {
			continue
		}
		if notReady && (wake.IsZero() || lapse.Before(wake)) {
			wake = lapse
		}
		n, err := r.decode(m.Name, v)
		if err != nil {
			r.mu.Lock()
			seen := r.badNodes[m.Name] == v
			r.badNodes[m.Name] = v
			r.mu.Unlock()
			if !seen {
				metricBadDigests.Inc()
				r.log.Warn("ignoring garbled digest", "node", m.Name, "err", err)
				r.recorder.Event(nodeRef(m), true, "InvalidDigest", fmt.Sprintf("ignoring annotation %s: %v", digest.Annotation, err))
			}
			continue
		}
		r.mu.Lock()
		delete(r.badNodes, m.Name)
		r.mu.Unlock()
		out = append(out, aggregate.Report{Node: m.Name, Digest: n})
	}
	slices.SortFunc(out, func(a, b aggregate.Report) int { return strings.Compare(a.Node, b.Node) })
	return out, wake
}

// lapse returns when a not-Ready node's vote lapses (false when it is Ready or
// the rule is off).
func (r *Reconciler) lapse(m *metav1.PartialObjectMetadata, now time.Time) (time.Time, bool) {
	since, ok := m.Annotations[notReadySince]
	if !ok || r.cfg.NodeGrace <= 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, since)
	if err != nil {
		t = now // no usable transition time: the grace starts when we saw it
	}
	return t.Add(r.cfg.NodeGrace), true
}

// noteLapse records whether node's vote has lapsed, logging the transitions,
// and returns lapsed.
func (r *Reconciler) noteLapse(node string, lapsed bool) bool {
	r.mu.Lock()
	was := r.lapsed[node]
	if lapsed {
		r.lapsed[node] = true
	} else {
		delete(r.lapsed, node)
	}
	r.mu.Unlock()
	switch {
	case lapsed && !was:
		r.log.Info("node not Ready past the grace period; its digest no longer votes", "node", node, "grace", r.cfg.NodeGrace)
	case !lapsed && was:
		r.log.Info("node Ready again; its digest votes", "node", node)
	}
	return lapsed
}

func nodeRef(m *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	node := &unstructured.Unstructured{}
	node.SetAPIVersion("v1")
	node.SetKind("Node")
	node.SetName(m.Name)
	node.SetUID(m.UID)
	return node
}

func (r *Reconciler) isLapsed(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lapsed[node]
}
