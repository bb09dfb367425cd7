package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var (
	podMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}
	prometheusGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}
)

// TestThePodMonitorTakesItsTokenFromAScrapeClass: with
// monitoring.podMonitor.scrapeClass the chart's PodMonitor names the
// Prometheus's scrape class and sets no token of its own (the Operator
// gives a monitor's own authorization precedence over the class's), renders
// no ServiceAccount whose Secret someone must fill, and binds the
// Prometheus's ServiceAccount to renumber-metrics-reader. The real PodMonitor
// and Prometheus CRDs accept the PodMonitor and the Prometheus of
// manifests/monitoring/prometheus-scrape-class.yaml (a projected token for
// the audience renumber-metrics, read from its file at every scrape), and
// the API server says that ServiceAccount may get /metrics - what the
// agents ask of a scraper's token.
func TestThePodMonitorTakesItsTokenFromAScrapeClass(t *testing.T) {
	helm, repo := helmBin(t)
	w := newWorld(t, 0)
	ctx := t.Context()
	if err := w.API.InstallPrometheusOperator(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.API.InstallPrometheusCRD(ctx); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, w, "monitoring")
	if _, err := w.API.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-k8s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := helmTemplate(t, helm, repo, `monitoring:
  podMonitor:
    enabled: true
    scrapeClass: renumber-metrics
    prometheusServiceAccount: {namespace: monitoring, name: prometheus-k8s}
`)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	pm := objs["PodMonitor renumber-system/renumber-writer"]
	if pm == nil {
		t.Fatal("no PodMonitor rendered")
	}
	if c, _, _ := unstructured.NestedString(pm, "spec", "scrapeClass"); c != "renumber-metrics" {
		t.Errorf("the PodMonitor's scrapeClass: %q", c)
	}
	eps, _, _ := unstructured.NestedSlice(pm, "spec", "podMetricsEndpoints")
	for _, ep := range eps {
		for _, k := range []string{"authorization", "bearerTokenSecret", "basicAuth", "oauth2"} {
			if v, ok := ep.(map[string]any)[k]; ok {
				t.Errorf("the PodMonitor's endpoint sets %s (%v): it hides the scrape class's token", k, v)
			}
		}
	}
	if sa := objs["ServiceAccount renumber-system/renumber-metrics-scraper"]; sa != nil {
		t.Error("the ServiceAccount renumber-metrics-scraper is rendered: nobody fills its Secret")
	}

	example, err := os.ReadFile(filepath.Join(repo, "manifests", "monitoring", "prometheus-scrape-class.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var prom map[string]any
	if err := yaml.Unmarshal(example, &prom); err != nil {
		t.Fatal(err)
	}
	classes, _, _ := unstructured.NestedSlice(prom, "spec", "scrapeClasses")
	if len(classes) != 1 || classes[0].(map[string]any)["name"] != "renumber-metrics" {
		t.Errorf("the example's scrape classes: %v", classes)
	}
	var apply bytes.Buffer
	apply.Write(example)
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		if strings.HasPrefix(k, "CustomResourceDefinition ") {
			continue // the world's own
		}
		b, err := yaml.Marshal(objs[k])
		if err != nil {
			t.Fatal(err)
		}
		apply.WriteString("\n---\n")
		apply.Write(b)
	}
	if err := w.API.ApplyYAML(ctx, apply.Bytes()); err != nil {
		t.Fatalf("the API server refuses the chart or the example Prometheus: %v", err)
	}
	got, err := w.API.Dynamic.Resource(podMonitorGVR).Namespace("renumber-system").Get(ctx, "renumber-writer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(got.Object, "spec", "scrapeClass"); c != "renumber-metrics" {
		t.Errorf("the stored PodMonitor's scrapeClass: %q (pruned by the CRD?)", c)
	}
	stored, err := w.API.Dynamic.Resource(prometheusGVR).Namespace("monitoring").Get(ctx, "k8s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	classes, _, _ = unstructured.NestedSlice(stored.Object, "spec", "scrapeClasses")
	if f, _, _ := unstructured.NestedString(classes[0].(map[string]any), "authorization", "credentialsFile"); f != "/etc/prometheus/renumber-metrics/token" {
		t.Errorf("the stored scrape class's credentialsFile: %q (pruned by the CRD?)", f)
	}

	review, err := w.API.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:monitoring:prometheus-k8s",
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"},
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Allowed {
		t.Errorf("the Prometheus's ServiceAccount may not get /metrics: %+v", review.Status)
	}
}

// TestAScrapeClassTokenFileIsReadAtEveryScrape: what the Operator makes of a
// scrape class with authorization.credentialsFile - a job whose
// authorization is credentials_file - in a real Prometheus scraping a real
// writer (--metrics-auth kubernetes). The file holds a token of the
// Prometheus's ServiceAccount for the audience renumber-metrics, as the
// kubelet projects it; replacing the file, as the kubelet renews it, is
// taken at the next scrape with no reload: a token for the API server
// instead is refused (up 0), a fresh one for the audience is served again
// (up 1). No Secret is read or renewed on the way.
func TestAScrapeClassTokenFileIsReadAtEveryScrape(t *testing.T) {
	prometheus := prometheusBin(t)
	w := newWorld(t, 0)
	ctx := t.Context()
	createNamespace(t, w, "monitoring")
	if _, err := w.API.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-k8s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.API.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "renumber-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "renumber-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(audiences ...string) string {
		t.Helper()
		tr, err := w.API.Client.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, "prometheus-k8s", &authv1.TokenRequest{
			Spec: authv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	project := func(tok string) { // as the kubelet swaps a projected volume's file
		t.Helper()
		if err := os.WriteFile(tokenFile+".new", []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	project(token("renumber-metrics"))

	metricsAddr := freeAddr(t)
	startWriter(t, w, "writer-a", "--metrics-addr", metricsAddr, "--metrics-auth", "kubernetes")
	// The job the Operator writes for a PodMonitor naming the class (its
	// certificate is the writer's self-signed one here: the CA's part is
	// TestRealNodesMetricsAreScrapedOnlyWithAToken's).
	cfg := map[string]any{"scrape_configs": []any{map[string]any{
		"job_name": "renumber", "scrape_interval": "1s", "scrape_timeout": "1s", "scheme": "https",
		"tls_config":     map[string]any{"insecure_skip_verify": true},
		"authorization":  map[string]any{"type": "Bearer", "credentials_file": tokenFile},
		"static_configs": []any{map[string]any{"targets": []any{metricsAddr}}},
	}}}
	addr := startPrometheus(t, prometheus, dir, cfg)
	up := func(what string, want float64) {
		t.Helper()
		eventually(t, what, func() (bool, string) {
			v, err := promQuery(addr, `up{job="renumber"}`)
			return err == nil && v == want, fmt.Sprintf("up %v (%v)", v, err)
		})
	}
	up("scraped with the projected token", 1)
	project(token()) // the API server's audience: the writer refuses it
	up("refused with a token for the API server", 0)
	project(token("renumber-metrics"))
	up("scraped with the renewed token, no reload", 1)
}
