package main

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/renumber/renumber/internal/writer/inspect"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Status takes kubectl's connection flags, an output format, and the names
// of the DynamicPrefixes to report; the writer's namespace defaults to where
// the chart installs it.
func TestStatusTakesKubectlsFlags(t *testing.T) {
	o, err := parseStatus(io.Discard, []string{"-n", "net", "--context", "home", "--kubeconfig", "/k", "--as", "me", "-o", "yaml", "home", "lab"})
	if err != nil {
		t.Fatal(err)
	}
	ov := o.config.overrides
	if ov.Context.Namespace != "net" || ov.CurrentContext != "home" || o.config.kubeconfig != "/k" || ov.AuthInfo.Impersonate != "me" ||
		o.output != "yaml" || !slices.Equal(o.names, []string{"home", "lab"}) {
		t.Errorf("parsed %+v (overrides %+v)", o, ov)
	}
	if o, _ := parseStatus(io.Discard, nil); o.config.overrides.Context.Namespace != "renumber-system" || o.writer != "renumber-writer" {
		t.Errorf("defaults: namespace %q writer %q", o.config.overrides.Context.Namespace, o.writer)
	}
	if _, err := parseStatus(io.Discard, []string{"-o", "xml"}); err == nil {
		t.Error("-o xml accepted")
	}
	if _, err := parseStatus(io.Discard, []string{"--bogus"}); err == nil {
		t.Error("--bogus accepted")
	}
	if _, err := parseStatus(io.Discard, []string{"-h"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("-h: %v, want help", err)
	}
}

// The writer Deployment's arguments decide, in any spelling a container
// takes, but for what the command line sets; the writer's own flags (not
// deciding what it writes) are skipped.
func TestTheWriterDeploymentsArgumentsDecideUnlessGivenHere(t *testing.T) {
	o, err := parseStatus(io.Discard, []string{"--l2-nudge", "always"})
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "renumber-writer", Namespace: "renumber-system"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Args: []string{"--budget-object-burst=9"}},
			{Name: "writer", Args: []string{"--metrics-addr=:9471", "--lease-duration", "60s", "--budget-object-burst=3",
				"--l2-nudge=never", "--kube-vip-configmap", "kube-system/kubevip",
				"--external-dns-target-annotation-keys=external-dns.kubernetes.io/target"}},
		}}}},
	})
	if err := fromDeployment(t.Context(), cs.AppsV1(), quiet, &o); err != nil {
		t.Fatal(err)
	}
	p := o.pipeline
	if p.Reconcile.Budget.ObjectBurst != 3 || p.L2Nudge != "always" || p.KubeVIP != "kube-system/kubevip" ||
		!slices.Equal(p.Reconcile.TargetKeys, []string{"external-dns.kubernetes.io/target"}) {
		t.Errorf("burst %d, l2 %q, kube-vip %q, keys %v", p.Reconcile.Budget.ObjectBurst, p.L2Nudge, p.KubeVIP, p.Reconcile.TargetKeys)
	}

	bad := fake.NewClientset(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "renumber-writer", Namespace: "renumber-system"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "writer", Args: []string{"--l2-nudge=sometimes"}}}}}},
	})
	o, _ = parseStatus(io.Discard, nil)
	var usage usageError
	if err := fromDeployment(t.Context(), bad.AppsV1(), quiet, &o); !errors.As(err, &usage) {
		t.Errorf("a writer argument no writer takes: %v, want a usage error", err)
	}
}

// Without a writer Deployment (a writer run elsewhere), the writer's
// defaults decide.
func TestNoWriterDeploymentMeansTheWritersDefaults(t *testing.T) {
	o, _ := parseStatus(io.Discard, nil)
	if err := fromDeployment(t.Context(), fake.NewClientset().AppsV1(), quiet, &o); err != nil {
		t.Fatal(err)
	}
	if o.pipeline.L2Nudge != "auto" || o.pipeline.Reconcile.Budget.ObjectBurst != 5 {
		t.Errorf("l2 %q burst %d, want the defaults", o.pipeline.L2Nudge, o.pipeline.Reconcile.Budget.ObjectBurst)
	}
}

// Names pick DynamicPrefixes in the order given; a name without one is an
// error, as with kubectl get.
func TestStatusReportsTheNamedDynamicPrefixes(t *testing.T) {
	r := inspect.Report{DynamicPrefixes: []inspect.DynamicPrefix{{Name: "home"}, {Name: "lab"}, {Name: "office"}}}
	got, err := only(r, []string{"office", "home"})
	if err != nil || len(got.DynamicPrefixes) != 2 || got.DynamicPrefixes[0].Name != "office" || got.DynamicPrefixes[1].Name != "home" {
		t.Errorf("only office, home: %+v %v", got.DynamicPrefixes, err)
	}
	if got, _ := only(r, nil); len(got.DynamicPrefixes) != 3 {
		t.Errorf("no names: %d reported, want all", len(got.DynamicPrefixes))
	}
	if _, err := only(r, []string{"nope"}); err == nil {
		t.Error("an unknown name reported nothing and no error")
	}
}

// status --help lists its own flags first and the writer's apart, under a
// heading that says they override the writer's Deployment; they still parse.
func TestStatusHelpListsTheWriterFlagsApart(t *testing.T) {
	var out strings.Builder
	if _, err := parseStatus(&out, []string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	own, writer, ok := strings.Cut(help, writerFlagsUsage)
	if !ok {
		t.Fatalf("no writer flags heading in:\n%s", help)
	}
	if !strings.Contains(own, "--watch") || strings.Contains(own, "--budget-total-burst") || !strings.Contains(writer, "--budget-total-burst") {
		t.Errorf("own flags:\n%s\nwriter flags:\n%s", own, writer)
	}
	if o, err := parseStatus(io.Discard, []string{"--budget-total-burst", "7"}); err != nil || !o.set["budget-total-burst"] {
		t.Errorf("a writer flag given here: %v, set %v", err, o.set)
	}
}

// A handover command line it cannot take is a usage error (exit status 2),
// before it reads anything.
func TestHandoverUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--dry-run=client"}, {"--dry-run=all"}} {
		var u usageError
		if err := runHandover(t.Context(), io.Discard, args); !errors.As(err, &u) {
			t.Errorf("handover %q: %v, want a usage error", args, err)
		}
	}
	if err := runHandover(t.Context(), io.Discard, []string{"--help"}); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("handover --help: %v, want help (exit 0)", err)
	}
}

// kubectl's spellings of a dry run are taken: --dry-run alone and
// --dry-run=server ask the API server, none (the default) changes.
func TestHandoverTakesKubectlsDryRun(t *testing.T) {
	for _, args := range [][]string{{"--dry-run"}, {"--dry-run=server"}, {"--dry-run=none"}} {
		var u usageError
		err := runHandover(t.Context(), io.Discard, append(args, "--kubeconfig", filepath.Join(t.TempDir(), "none")))
		if err == nil || errors.As(err, &u) {
			t.Errorf("handover %q: %v, want it past its flags, failing to read the cluster", args, err)
		}
	}
	for v, want := range map[string]bool{"none": false, "server": true, "false": false, "true": true} {
		if dry, err := handoverDryRun(v); err != nil || dry != want {
			t.Errorf("--dry-run=%s: dry run %v (%v), want %v", v, dry, err, want)
		}
	}
}
