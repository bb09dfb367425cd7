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
	gr := schema.GroupResource{Group: "cilium.io", Resource: "ciliumcidrgroups"}
	for _, m := range policyMessages(t, "renumber-writer-sizes") {
		if strings.Contains(m, "status") {
			continue
		}
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

// TestEveryMetadataRefusalIsRecognised: every message with which a field
// policy refuses a change of labels, annotations, finalizers or owners is
// one the writer takes as the object changed on the way (refusedForMetadata:
// said once, not retried), and no refusal of a value or a size is.
func TestEveryMetadataRefusalIsRecognised(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	refusal := func(policy, m string) error {
		return apierrors.NewForbidden(gr, "web", errors.New("ValidatingAdmissionPolicy '"+policy+"' with binding '"+policy+"' denied request: "+m))
	}
	n := 0
	for _, policy := range []string{"renumber-writer-services", "renumber-writer-gateways", "renumber-writer-pools", "renumber-writer-kubevip", "renumber-writer-owned", "renumber-writer-dynamicprefixes"} {
		for _, m := range policyMessages(t, policy) {
			if !strings.Contains(m, "change") || !strings.Contains(m, "labels") && !strings.Contains(m, "annotations") {
				continue
			}
			n++
			if !refusedForMetadata(refusal(policy, m)) {
				t.Errorf("%s refuses %q: not taken as the object changed on the way (its message does not begin %q)", policy, m, MetadataRefusal)
			}
		}
	}
	if n < 7 {
		t.Errorf("%d messages of the field policies refuse labels or annotations, want at least 7 (two a kind, and renumber-writer-owned's)", n)
	}
	for _, err := range []error{
		refusal("renumber-writer-values", "every entry the writer adds must lie in a prefix the status names"),
		refusal("renumber-writer-sizes", SizeRefusal+" pools of at most 256 entries"),
		apierrors.NewConflict(gr, "web", errors.New(MetadataRefusal)),
		errors.New(MetadataRefusal),
	} {
		if refusedForMetadata(err) {
			t.Errorf("%v taken as a refusal for metadata", err)
		}
	}
}

// policyMessages are the messages of the validations of the policy name in
// manifests/writer/policy.yaml.
func policyMessages(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "writer", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var p admissionv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal(doc, &p); err != nil || p.Kind != "ValidatingAdmissionPolicy" || p.Name != name {
			continue
		}
		for _, v := range p.Spec.Validations {
			messages = append(messages, v.Message)
		}
	}
	if len(messages) == 0 {
		t.Fatalf("no validation of %s found in manifests/writer/policy.yaml", name)
	}
	return messages
}
