package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/renumber/renumber/tools/world"
)

// tenant is what an admin gives a team: a ServiceAccount in the team's
// namespace, bound there to a Role that may create and change Services and
// NetworkPolicies - in that namespace only, nothing cluster-wide - and
// clients holding its token, so the real API server's RBAC decides what
// it may do.
type tenant struct {
	ns   string
	user string // as the audit log names it
	cs   kubernetes.Interface
	dyn  dynamic.Interface
}

// newTenant makes namespace ns (if it is not there) and its tenant.
func newTenant(t *testing.T, w *world.World, ns string) tenant {
	t.Helper()
	ctx := t.Context()
	cs := w.API.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Name: "tenant", Namespace: ns}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: verbs},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: verbs},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := w.API.ServiceAccountIn(ctx, ns, "tenant", "")
	if err != nil {
		t.Fatal(err)
	}
	tn := tenant{ns: ns, user: id.User, cs: kubernetes.NewForConfigOrDie(id.Config), dyn: dynamic.NewForConfigOrDie(id.Config)}
	// Its rights end at its namespace: it cannot even read another's.
	if _, err := tn.cs.CoreV1().Services("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant %s listing Services in kube-system: %v, want forbidden", ns, err)
	}
	return tn
}
