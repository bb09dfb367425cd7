package requests

import "testing"

func TestDescribe(t *testing.T) {
	tests := []struct {
		method, path   string
		watch          bool
		verb, resource string
	}{
		{"PATCH", "/api/v1/nodes/node1", false, "patch", "nodes"},
		{"GET", "/api/v1/nodes", true, "watch", "nodes"},
		{"PATCH", "/apis/dynamic-prefix.io/v1alpha1/dynamicprefixes/home/status", false, "patch", "dynamicprefixes/status"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/renumber-system/leases/renumber-writer", false, "update", "leases"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/default/events", false, "create", "events"},
		{"GET", "/api/v1/namespaces/default", false, "get", "namespaces"},
		{"GET", "/readyz", false, "get", "other"},
	}
	for _, tt := range tests {
		verb, res := Describe(tt.method, tt.path, tt.watch)
		if verb != tt.verb || res != tt.resource {
			t.Errorf("Describe(%s %s) = %s %s, want %s %s", tt.method, tt.path, verb, res, tt.verb, tt.resource)
		}
	}
}
