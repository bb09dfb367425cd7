package backends

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestEntriesAreReadVerbatimAndGarbageIsAnError(t *testing.T) {
	pool := func(addresses any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"addresses": addresses}}}
	}
	got, err := metallbEntries(pool([]any{"192.0.2.1 - 192.0.2.9", "2001:db8::/64"}))
	if err != nil || !slices.Equal(got, []string{"192.0.2.1 - 192.0.2.9", "2001:db8::/64"}) {
		t.Errorf("metallbEntries = %q, %v", got, err)
	}
	if got, err := metallbEntries(&unstructured.Unstructured{Object: map[string]any{}}); err != nil || got != nil {
		t.Errorf("no spec: %q, %v; want nothing and no error", got, err)
	}
	for _, bad := range []any{"192.0.2.0/24", []any{42}, map[string]any{}} {
		if _, err := metallbEntries(pool(bad)); err == nil {
			t.Errorf("addresses %#v: no error", bad)
		}
	}
}
