package apply

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// TestEverySizeRefusalIsRecognised: every message renumber-writer-sizes can
// refuse a write to a Service, pool or NetworkPolicy with is one the writer
// takes as final for that object, and no other refusal is. (The bound on the
// status's history is the writer's own to keep: it writes at most 11.)
func TestEverySizeRefusalIsRecognised(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "writer", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var p admissionv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal(doc, &p); err != nil || p.Kind != "ValidatingAdmissionPolicy" || p.Name != "renumber-writer-sizes" {
			continue
		}
		for _, v := range p.Spec.Validations {
			if strings.Contains(v.Message, "status") {
				continue
			}
			messages = append(messages, v.Message)
		}
	}
	if len(messages) == 0 {
		t.Fatal("no validation of renumber-writer-sizes found in manifests/writer/policy.yaml")
	}
	gr := schema.GroupResource{Group: "cilium.io", Resource: "ciliumcidrgroups"}
	for _, m := range messages {
		err := apierrors.NewForbidden(gr, "lan", errors.New("ValidatingAdmissionPolicy 'renumber-writer-sizes' with binding 'renumber-writer-sizes' denied request: "+m))
		if !refusedForItsSize(err) {
			t.Errorf("a refusal %q is not taken as final: its message does not begin %q", m, SizeRefusal)
		}
	}
	for _, err := range []error{
		apierrors.NewForbidden(gr, "lan", errors.New("ValidatingAdmissionPolicy 'renumber-writer-values' with binding 'renumber-writer-values' denied request: every entry the writer adds must lie in a prefix the status names")),
		apierrors.NewConflict(gr, "lan", errors.New(SizeRefusal)),
		errors.New(SizeRefusal),
	} {
		if refusedForItsSize(err) {
			t.Errorf("%v taken as a refusal for the object's size", err)
		}
	}
}
