package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
)

// TestOnlyTheListedWebhookKeysMove (issue 42) plays the stolen writer token
// against the labels and annotations of the objects it updates, with keys
// drawn from the listed ones, ones only like them, a GitOps tool's and the
// ones the writer and the policies read - 150 generated writes with the
// list empty, then 150 with the webhook's keys listed (one exactly, one by
// its prefix) - and checks each answer of the real API server against the
// model: a write that moves a key is admitted only if the key is listed,
// no one reads it, and the kind lets unread keys move there (the labels of
// LB-IPAM pools, NetworkPolicies and DynamicPrefixes, the annotations of
// every pool kind and of DynamicPrefixes; never a Service's, never a CIDR
// group's labels). A fixed seed, as TestAStolenWriterTokenMovesNoAddress.
func TestOnlyTheListedWebhookKeysMove(t *testing.T) {
	s := stealWriterToken(t, nil)
	followingPoolAndPolicy(t, s)
	createService(t, s.w, "web", map[string]string{"dynamic-prefix.io/name": "home", holdings.AnnotationIPs: "192.0.2.7"})

	type object struct {
		kind            string
		gvr             schema.GroupVersionResource
		ns, name        string
		labelsMove      bool // unread labels may move, if listed
		annotationsMove bool // likewise, annotations
	}
	objects := []object{
		{"an LB-IPAM pool", poolGVR, "", "lb", true, true},
		{"a NetworkPolicy", networkPolicyGVR, "default", "lan", true, true},
		{"a CIDR group", groupGVR, "", "probe", false, true},
		{"a DynamicPrefix", api.GVR, "", "home", true, true},
		{"a Service", serviceGVR, "default", "web", false, false},
	}
	keys := []string{webhookLabel, webhookLabel + "2", "policy.example.org/", webhookAnnotation, "audit.example.org/other",
		"audit.example.org", "xaudit.example.org/seen", "app.kubernetes.io/instance", "argocd.argoproj.io/tracking-id",
		"kustomize.toolkit.fluxcd.io/name", "app.kubernetes.io/managed-by", "advertise", "dynamic-prefix.io/name", "dynamic-prefix.io/subnet"}
	// read: the keys the writer or the policies read, of labels (or not).
	read := func(label bool, k string) bool {
		return strings.HasPrefix(k, "dynamic-prefix.io/") || label && (k == "app.kubernetes.io/managed-by" || k == "advertise")
	}
	rng := rand.New(rand.NewPCG(42, 43))
	// play makes 150 writes; it returns how many moved a key and were
	// admitted.
	play := func(listed func(string) bool) (moved int) {
		for i := range 150 {
			o := objects[rng.IntN(len(objects))]
			k := keys[rng.IntN(len(keys))]
			label := rng.IntN(2) == 0
			field := "annotations"
			if label {
				field = "labels"
			}
			if k == "policy.example.org/" {
				k += "team" // a prefix is no key: the exact key's neighbour under it
			}
			u := s.read(t, o.gvr, o.ns, o.name)
			have := u.GetAnnotations()
			if label {
				have = u.GetLabels()
			}
			_, present := have[k]
			var value any = fmt.Sprintf("v%d", i)
			if present && rng.IntN(3) == 0 {
				value = nil // removed
			}
			moves := value != nil || present
			may := o.annotationsMove
			if label {
				may = o.labelsMove
			}
			want := !moves || may && !read(label, k) && listed(k)
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{field: map[string]any{k: value}}})
			err := s.patch(o.gvr, o.ns, o.name, string(body))
			if got := err == nil; got != want {
				t.Errorf("write %d, %s's %s %s=%v: %s, want admitted %v", i, o.kind, field, k, value, errString(err), want)
			} else if err != nil && !denied(err) {
				t.Errorf("write %d, %s's %s %s=%v: %v, want a refusal", i, o.kind, field, k, value, err)
			}
			if moves && err == nil {
				moved++
			}
		}
		return moved
	}
	if n := play(func(string) bool { return false }); n != 0 {
		t.Errorf("%d writes moved a key with none listed", n)
	}

	listWebhookKeys(t, s.w, webhookLabel, webhookPrefix)
	n := 0
	eventually(t, "the webhook keys listed", func() (bool, string) {
		n++
		err := s.patch(poolGVR, "", "lb", fmt.Sprintf(`{"metadata":{"labels":{%q:"probe-%d"}}}`, webhookLabel, n))
		return err == nil, errString(err)
	})
	moved := play(func(k string) bool { return k == webhookLabel || strings.HasPrefix(k, webhookPrefix) })
	t.Logf("%d of 150 writes moved a listed key", moved)
	if moved == 0 {
		t.Error("no write moved a listed key: the test proves nothing")
	}
}
