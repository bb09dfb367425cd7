package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/internal/writer/inspect"
	"github.com/renumber/renumber/tools/world"
)

// statusIdentity is a ServiceAccount holding only the renumber-reader role,
// as a person running kubectl renumber status would.
func statusIdentity(t *testing.T, w *world.World) *world.Identity {
	t.Helper()
	ctx := t.Context()
	cs := w.API.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "status-reader", Namespace: world.Namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(world.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: world.Namespace}}
	meta := metav1.ObjectMeta{Name: "status-reader", Namespace: world.Namespace}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "renumber-reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(world.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "renumber-reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := w.API.ServiceAccount(ctx, sa.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// status runs kubectl renumber status as id with args; it must succeed (exit
// 0: everything in sync, nothing Degraded).
func status(t *testing.T, id *world.Identity, args ...string) string {
	t.Helper()
	out, code := statusExit(t, id, args...)
	if code != 0 {
		t.Fatalf("kubectl renumber status %q: exit %d", args, code)
	}
	return out
}

// statusExit runs kubectl renumber status as id with args and returns its
// output and exit status: 0, or 3 when something is Degraded or not in sync
// (anything else fails the test).
func statusExit(t *testing.T, id *world.Identity, args ...string) (string, int) {
	t.Helper()
	argv := append([]string{"status", "--kubeconfig", id.Kubeconfig}, args...)
	out, err := exec.Command(filepath.Join(binaries(t), "kubectl-renumber"), argv...).Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return string(out), 3
	case errors.As(err, &ee):
		t.Fatalf("kubectl renumber %s: %v\n%s", strings.Join(argv, " "), err, ee.Stderr)
	default:
		t.Fatalf("kubectl renumber %s: %v", strings.Join(argv, " "), err)
	}
	return "", 0
}

func statusJSON(t *testing.T, id *world.Identity) inspect.Report {
	t.Helper()
	var r inspect.Report
	if out := status(t, id, "-o", "json"); json.Unmarshal([]byte(out), &r) != nil || len(r.DynamicPrefixes) != 1 {
		t.Fatalf("unexpected output:\n%s", out)
	}
	return r
}

// TestStatusCommand: kubectl renumber status, run with the read-only role
// only, explains a renumbering (the nodes' votes, the draining prefix and
// its deadline, every object in sync, the lease holder), a garbled digest,
// and an object that no longer holds what the writer would write. It makes
// no write (audit log).
func TestStatusCommand(t *testing.T) {
	w := haWorld(t, 2)
	ctx := t.Context()
	id := statusIdentity(t, w)
	m := mark(t, w)
	for _, n := range []string{"node1", "node2"} {
		startAgent(t, w, n)
	}
	writer := startWriter(t, w, "writer-a")
	poolIs(t, w, "pool follows A", prefixA.String())
	advertise(t, w, prefixB, prefixA)
	poolIs(t, w, "pool follows B", prefixB.String(), prefixA.String())
	eventually(t, "status written", func() (bool, string) {
		st := dpStatus(t, w, "home")
		return st.CurrentPrefix == prefixB.String(), st.CurrentPrefix
	})

	r := statusJSON(t, id)
	// A name, and -o yaml: the same report, as kubectl get would give it.
	var named inspect.Report
	if err := yaml.Unmarshal([]byte(status(t, id, "home", "-o", "yaml")), &named); err != nil || len(named.DynamicPrefixes) != 1 ||
		named.DynamicPrefixes[0].Name != "home" || named.DynamicPrefixes[0].Current != r.DynamicPrefixes[0].Current {
		t.Errorf("status home -o yaml: %+v %v", named, err)
	}
	if out, err := exec.Command(filepath.Join(binaries(t), "kubectl-renumber"), "status", "--kubeconfig", id.Kubeconfig, "nope").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `"nope" not found`) {
		t.Errorf("status nope: %v\n%s", err, out)
	}
	dp := r.DynamicPrefixes[0]
	if dp.Current != prefixB.String() || dp.Source != "router-advertisement" || !strings.Contains(dp.Why, "2 of 2 reporting node(s) prefer it") {
		t.Errorf("current %s (%s), why %q", dp.Current, dp.Source, dp.Why)
	}
	for _, v := range dp.Votes {
		if !slices.Equal(v.Preferred, []string{prefixB.String()}) || !slices.Equal(v.Deprecated, []string{prefixA.String()}) || v.Problem != "" {
			t.Errorf("vote %+v, want %s preferred and %s deprecated", v, prefixB, prefixA)
		}
	}
	if len(dp.Votes) != 2 {
		t.Errorf("votes %+v, want node1 and node2", dp.Votes)
	}
	if len(dp.Draining) != 1 || dp.Draining[0].Prefix != prefixA.String() || dp.Draining[0].Expires == nil || !dp.Draining[0].Expires.After(time.Now()) {
		t.Errorf("draining %+v, want %s with a deadline ahead", dp.Draining, prefixA)
	}
	var objects []string
	for _, o := range dp.Objects {
		objects = append(objects, o.Object)
		if !o.InSync {
			t.Errorf("%s not in sync after the writer's pass: %v", o.Object, o.Pending)
		}
	}
	if want := []string{"dynamicprefixes/home", "ciliumloadbalancerippools/lb", "services/default/web"}; !slices.Equal(objects, want) {
		t.Errorf("objects %q, want %q", objects, want)
	}
	if r.Lease == nil || r.Lease.Holder != "writer-a" || r.Lease.RenewedAt == nil {
		t.Errorf("lease %+v, want held by writer-a", r.Lease)
	}

	// A garbled digest on a third Node, and, with the writer stopped, a pool
	// edited by hand: both show, with why. --watch prints again when the
	// garbled digest appears.
	watch := exec.CommandContext(ctx, filepath.Join(binaries(t), "kubectl-renumber"), "status", "--watch", "--interval", "200ms",
		"-o", "json", "--kubeconfig", id.Kubeconfig)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	// A --watch that never prints again ends the reads below with an error,
	// not a hung test.
	stopWatch := time.AfterFunc(time.Minute, func() { _ = watch.Process.Kill() })
	defer stopWatch.Stop()
	docs := json.NewDecoder(stdout)
	var first, second inspect.Report
	if err := docs.Decode(&first); err != nil || len(first.DynamicPrefixes[0].Votes) != 2 {
		t.Fatalf("--watch, first: %v, %+v", err, first)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node9", Annotations: map[string]string{digest.Annotation: "v1;eth0=not-a-prefix"}}}
	if _, err := w.API.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next answer that differs (the Lease renewal time changes too).
	for len(second.DynamicPrefixes) == 0 || len(second.DynamicPrefixes[0].Votes) != 3 {
		if err := docs.Decode(&second); err != nil {
			t.Fatalf("--watch: %v", err)
		}
	}
	if v := second.DynamicPrefixes[0].Votes[2]; v.Node != "node9" || !strings.Contains(v.Problem, "digest cannot be read") {
		t.Errorf("--watch: node9's vote %+v", v)
	}
	w.Stop(writer, 10*time.Second)
	body := `{"spec":{"blocks":[{"cidr":"192.0.2.0/24"}]}}`
	if _, err := w.API.Dynamic.Resource(poolGVR).Patch(ctx, "lb", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubectl renumber status says so with its exit status too.
	if _, code := statusExit(t, id); code != 3 {
		t.Errorf("a pool not in sync: exit %d, want 3", code)
	}
	text := statusAs(t, id)
	flat := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		"node9 does not vote: digest cannot be read",
		"ciliumloadbalancerippools/lb would write: spec entries: \"192.0.2.0/24\" -> \"192.0.2.0/24," + prefixB.String() + "," + prefixA.String() + "\"",
		"services/default/web in sync",
		"draining " + prefixA.String() + " until",
		"Lease held by nobody", // the writer released it when it stopped
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}

	settleWrites()
	if ws := writesBy(t, w, m, id.User); len(ws) != 0 {
		t.Errorf("the status command wrote: %v", ws)
	}
}

// statusAs runs the standalone renumber-status (the same binary under that
// name) in text form.
func statusAs(t *testing.T, id *world.Identity) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "renumber-status")
	if err := os.Symlink(filepath.Join(binaries(t), "kubectl-renumber"), link); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(link, "--kubeconfig", id.Kubeconfig).Output()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 3) {
		t.Fatalf("renumber-status: %v", err)
	}
	return string(out)
}

// TestKubectlRenumberHelp: what a user types first, through kubectl itself
// (the plugin found on PATH): --help, -h and no command print the usage and
// succeed; each command's --help succeeds; an unknown command fails with 2.
func TestKubectlRenumberHelp(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(kubectl, append([]string{"renumber"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+binaries(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {}, {"help"}} {
		out, code := run(args...)
		if code != 0 || !strings.Contains(out, "kubectl renumber status") || !strings.Contains(out, "kubectl renumber handover") {
			t.Errorf("kubectl renumber %q: exit %d\n%s", args, code, out)
		}
	}
	// kubectl's connection flags on both commands.
	for cmd, flags := range map[string][]string{
		"status":   {"--kubeconfig", "--context", "-n, --namespace", "--as ", "-o, --output", "[NAME...]"},
		"handover": {"--kubeconfig", "--context", "--target-keys"},
	} {
		out, code := run(cmd, "--help")
		for _, flag := range flags {
			if code != 0 || !strings.Contains(out, flag) {
				t.Errorf("kubectl renumber %s --help: exit %d, no %s\n%s", cmd, code, flag, out)
			}
		}
	}
	if out, code := run("status", "-o", "xml"); code != 2 || !strings.Contains(out, "want text, json or yaml") {
		t.Errorf("-o xml: exit %d, want 2\n%s", code, out)
	}
	if _, code := run("bogus"); code != 2 {
		t.Errorf("an unknown command: exit %d, want 2", code)
	}
	// An API server that is not there: said at once (not after the minute's
	// wait that blamed the role), exit 1. Loopback port 1: nothing listens.
	dead := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(dead, []byte(`apiVersion: v1
kind: Config
clusters:
  - {name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}
  - {name: d, cluster: {server: "https://127.0.0.1:2", insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}, {name: d, context: {cluster: d, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := run("status", "--kubeconfig", dead, "--timeout", "5m"); code != 1 || !strings.Contains(out, "cannot reach the API server at https://127.0.0.1:1") {
		t.Errorf("an unreachable API server: exit %d\n%s", code, out)
	}
	// --context picks the kubeconfig's other context; KUBECONFIG is read as kubectl reads it.
	if out, code := run("status", "--kubeconfig", dead, "--context", "d"); code != 1 || !strings.Contains(out, "https://127.0.0.1:2") {
		t.Errorf("--context d: exit %d\n%s", code, out)
	}
}
