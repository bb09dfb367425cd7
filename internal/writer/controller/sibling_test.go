package controller

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/backends"
)

// A sibling IPPool labelled with a DynamicPrefix whose pools do not render
// it - a stolen writer token's copy of a pool that follows nothing (red team
// r6b), which renumber-writer-siblings now refuses, and one the writer made
// before its pool stopped following - is deleted by the pass its cache event
// queues: the pass over a DynamicPrefix deletes the siblings labelled with
// it that no pool following it renders, and the pass over one that does not
// exist releases everything labelled with it.
func TestASiblingNoFollowingPoolRendersIsDeleted(t *testing.T) {
	for _, dp := range []string{"home", "nosuch"} {
		t.Run(dp, func(t *testing.T) {
			f := converged(t, generous)
			f.calico = calicoCache()
			sibling := ippool("default-ipv6-ippool-2001-db8-a---64", prefixA, nil)
			sibling.SetLabels(backends.MadeFor(dp, map[string]string{backends.CalicoLabelManagedBy: backends.CalicoManagedBy, backends.LabelSiblingOf: "default-ipv6-ippool"}))
			sibling.Object["spec"].(map[string]any)["disabled"], sibling.Object["spec"].(map[string]any)["natOutgoing"] = true, true
			for _, u := range []*unstructured.Unstructured{ippool("default-ipv6-ippool", "fd00:10::/64", nil), sibling} {
				if _, err := f.dyn.Resource(calicoGVR).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				f.cache(f.calico, u)
			}
			f.emptyQueue()
			p, _ := backends.ReadIPPool(sibling)
			f.ctl.CalicoPoolChanged(p.(*backends.IPPool))
			if got := f.queued(); len(got) != 1 || got[0] != dp {
				t.Fatalf("the sibling's event queued passes over %q, want %s", got, dp)
			}
			f.sync(Key{Action: SyncDynamicPrefix, Name: dp})
			if _, err := f.dyn.Resource(calicoGVR).Get(t.Context(), sibling.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the sibling labelled %s of a pool that follows nothing is still there (%v)", dp, err)
			}
			if _, err := f.dyn.Resource(calicoGVR).Get(t.Context(), "default-ipv6-ippool", metav1.GetOptions{}); err != nil {
				t.Errorf("the pool it copied: %v", err)
			}
		})
	}
}
