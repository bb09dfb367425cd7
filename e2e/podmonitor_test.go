package e2e

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
