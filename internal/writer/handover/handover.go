// Package handover rewrites what renumber wrote into the shape the existing
// operator (dynamic-prefix.io, v0.0.10 and later) reads, for a user switching
// back to it (`kubectl renumber handover`). Pool and Service records need no
// rewrite: renumber writes them in that operator's formats. What differs is
// the status history and the DNS target keys:
//   - that operator pools the current prefix and the first maxPrefixHistory
//     entries of status.history, whatever their state, and appends a replaced
//     prefix at the end: so the history it reads holds only the prefixes
//     still draining, oldest first (renumber's has the current prefix first
//     and keeps expired ones);
//   - it takes the current prefix's acquiredAt from the PrefixAcquired
//     condition's last transition;
//   - it finds the Calico IPPools of draining prefixes by its own name
//     (the parent's, then the first 8 hex digits of the CIDR's SHA-256) and
//     labels: ours it would neither see nor ever delete, so each is
//     replaced by the one it would have created;
//   - it looks up its CiliumBGPAdvertisement of a subnet by its own name
//     ("dp-<dp>-<subnet>") and labels: ours would stay beside the one it
//     creates, so each is replaced by the one it would have created;
//   - a target key it does not write (external-dns.kubernetes.io/target
//     before its v0.0.18) would keep an address it never moves: our entries
//     there are released.
//
// Pure: values in, values out.
package handover

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/model"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/backends"
	"github.com/renumber/renumber/internal/writer/decide"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// Status returns st as the existing operator reads it.
func Status(st api.Status) api.Status {
	out := st
	out.History = nil
	out.Conditions = slices.Clone(st.Conditions)
	for _, h := range st.History {
		switch h.State {
		case model.StateActive:
			i := slices.IndexFunc(out.Conditions, func(c metav1.Condition) bool { return c.Type == decide.PrefixAcquired })
			if i >= 0 && h.AcquiredAt != nil && h.Prefix == st.CurrentPrefix {
				out.Conditions[i].LastTransitionTime = *h.AcquiredAt
			}
		case model.StateDraining:
			h.ExpiresAt = nil
			out.History = append(out.History, h)
		}
	}
	// Oldest first, as that operator appends them (an entry without
	// deprecatedAt sorts as the oldest).
	slices.SortStableFunc(out.History, func(a, b api.HistoryEntry) int {
		return deprecated(a).Compare(deprecated(b))
	})
	return out
}

func deprecated(h api.HistoryEntry) time.Time {
	if h.DeprecatedAt == nil {
		return time.Time{}
	}
	return h.DeprecatedAt.Time
}

// Service returns the merge patch of annotations that hands the Service with
// annotations ann back to an operator writing the DNS target under keys
// (nil when nothing is to change): our entries leave the other target keys
// (the user's stay), and renumber's own records that operator does not read
// go.
func Service(ann map[string]string, keys []string) map[string]any {
	live := holdings.Live(ann, keys)
	if !live.KeysRecorded && ann[holdings.AnnotationL2Nudged] == "" {
		return nil
	}
	patch := map[string]any{}
	for _, k := range live.TargetKeys {
		if slices.Contains(keys, k) {
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(live.Targets[k]), func(e string) bool { return slices.Contains(live.ManagedTargets, e) })
		if len(kept) == 0 {
			patch[k] = nil
		} else {
			patch[k] = strings.Join(kept, ",")
		}
	}
	if live.KeysRecorded {
		patch[holdings.AnnotationManagedTargetKeys] = nil
	}
	if _, ok := ann[holdings.AnnotationL2Nudged]; ok {
		patch[holdings.AnnotationL2Nudged] = nil
	}
	return patch
}

// Sibling returns, for an IPPool renumber created for a draining prefix, the
// IPPool the existing operator would have created in its place: its name, its
// labels, the same spec (nil for any other IPPool). Delete u, then create the
// result: never two pools with one CIDR.
func Sibling(u *unstructured.Unstructured) *unstructured.Unstructured {
	if !backends.CalicoSibling(u) || backends.CalicoAdopted(u) {
		return nil
	}
	cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	parent := backends.CalicoParent(u)
	sum := sha256.Sum256([]byte(cidr))
	out := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(parent + "-" + hex.EncodeToString(sum[:])[:8])
	dp, _ := backends.CalicoFollows(u)
	out.SetLabels(backends.MadeFor(dp, map[string]string{
		backends.CalicoLabelManagedBy: dynamicprefix.OperatorManagedBy,
		backends.LabelParentPool:      parent,
	}))
	return out
}

// Advertisement returns, for a CiliumBGPAdvertisement renumber created, the
// one the existing operator would have created in its place: its name and
// labels, the same spec, owned by the DynamicPrefix dp (as its controller).
// nil for any other advertisement. Create the result, then delete u: the
// routes are advertised throughout.
func Advertisement(u, dp *unstructured.Unstructured) *unstructured.Unstructured {
	l := u.GetLabels()
	name, _ := backends.AdvertisementFollows(u)
	subnet := l[backends.LabelSubnet]
	if l[backends.CiliumLabelManagedBy] != backends.CiliumManagedBy || name == "" || subnet == "" || dp == nil || dp.GetName() != name {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	out := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(backends.OperatorAdvertisementName(name, subnet))
	out.SetLabels(backends.MadeFor(name, map[string]string{backends.CiliumLabelManagedBy: dynamicprefix.OperatorManagedBy, backends.LabelSubnet: subnet}))
	yes := true
	out.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: dp.GetAPIVersion(), Kind: dp.GetKind(), Name: dp.GetName(), UID: dp.GetUID(),
		Controller: &yes, BlockOwnerDeletion: &yes}})
	return out
}
