package world

import (
	"slices"
	"testing"
)

// The world's identities are the shipped RBAC and admission policies, the
// files the writer's backends test checks against each pool kind's
// declaration (internal/writer/backends/declare_test.go): a world test runs
// as the writer a user installs, never as one granted by hand.
func TestTheWorldsIdentitiesAreTheCheckedManifests(t *testing.T) {
	checked := []string{"writer/rbac.yaml", "reader/rbac.yaml", "writer/policy.yaml", "writer/policy-values.yaml"}
	applied := rbacFiles(35) // the pinned kube-apiserver's
	for _, f := range checked {
		if !slices.Contains(applied, f) {
			t.Errorf("InstallRBAC does not apply manifests/%s: the world's writer would not be the one declare_test checks", f)
		}
	}
}
