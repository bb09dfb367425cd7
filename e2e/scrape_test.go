package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// TestRealNodesMetricsAreScrapedOnlyWithAToken: with the chart's defaults (agents on
// the node's IP, every process behind HTTPS and the token guard), a real
// Prometheus (built from the module proxy, make tools: Debian's lacks
// Kubernetes discovery) with the job of manifests/monitoring/scrape-config.yaml
// and the token of a ServiceAccount bound to renumber-metrics-reader scrapes
// every agent, writer and shadow Pod, and every panel of the dashboard shows
// data. Without a token, with a token not bound, or over plain HTTP, a scrape
// is refused.
func TestRealNodesMetricsAreScrapedOnlyWithAToken(t *testing.T) {
	prometheus, err := world.Bin("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus missing in CI: make tools builds it: %v", err)
		}
		t.Skipf("prometheus not built (make tools): %v", err)
	}
	w := realWorld(t, 2, "helm", "shadow.enabled=true")
	renumbered(t, w, prefixA.String())
	ctx := t.Context()

	// Prometheus's identity, and a tenant's that is not bound.
	if _, err := w.API.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, sa := range []string{"prometheus", "tenant"} {
		if _, err := w.API.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		id, err := w.API.ServiceAccountIn(ctx, "monitoring", sa, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[sa] = id.Config.BearerToken
	}
	if _, err := w.API.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-renumber"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "renumber-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: "monitoring"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var targets []string // every Pod's metrics address
	for _, app := range []string{"renumber-agent", "renumber-writer", "renumber-shadow"} {
		for _, p := range pods(t, w, app) {
			port := "9471"
			if app == "renumber-agent" {
				port = "9470"
			}
			targets = append(targets, net.JoinHostPort(p.Status.PodIP, port))
		}
	}
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url, token string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, target := range targets {
		for who, want := range map[string]int{"": http.StatusUnauthorized, "made-up": http.StatusUnauthorized,
			tokens["tenant"]: http.StatusForbidden, tokens["prometheus"]: http.StatusOK} {
			if got := get("https://"+target+"/metrics", who); got != want {
				t.Errorf("%s/metrics with token %.12q: %d, want %d", target, who, got, want)
			}
		}
		if got := get("http://"+target+"/metrics", tokens["prometheus"]); got == http.StatusOK {
			t.Errorf("%s/metrics over plain HTTP was served", target)
		}
	}

	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "manifests", "monitoring", "scrape-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	// From outside the cluster: the API server through the admin kubeconfig,
	// Prometheus's token from a file, a scrape every second. Nothing else of
	// the shipped job changes.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tokens["prometheus"]), 0o600); err != nil {
		t.Fatal(err)
	}
	job := cfg["scrape_configs"].([]any)[0].(map[string]any)
	job["scrape_interval"] = "1s"
	job["kubernetes_sd_configs"].([]any)[0].(map[string]any)["kubeconfig_file"] = w.API.AdminFile
	job["authorization"].(map[string]any)["credentials_file"] = tokenFile
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(prometheus, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", addr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "prometheus.log")); err == nil {
				t.Logf("prometheus.log:\n%s", b)
			}
		}
	})

	eventually(t, "every renumber Pod scraped and up", func() (bool, string) {
		up, err := promQuery(addr, `sum(up{job="renumber"})`)
		return err == nil && up == float64(len(targets)), fmt.Sprintf("%v of %d targets up (%v)", up, len(targets), err)
	})
	// A renumbering while Prometheus watches gives the latency panels and the
	// counters something to count.
	renumbered(t, w, prefixB.String(), prefixA.String())

	vars := strings.NewReplacer("$job", "renumber", "$namespace", ".*")
	for _, p := range readDashboard(t).Panels {
		if len(p.Targets) == 0 {
			continue // a row
		}
		eventually(t, "panel "+p.Title+" shows data", func() (bool, string) {
			var said []string
			for _, target := range p.Targets {
				n, err := promSeries(addr, vars.Replace(target.Expr))
				if err == nil && n > 0 {
					return true, ""
				}
				said = append(said, fmt.Sprintf("%s: %d series (%v)", target.Expr, n, err))
			}
			return false, strings.Join(said, "; ")
		})
	}
}

// promQuery evaluates an instant query that returns one sample.
func promQuery(addr, q string) (float64, error) {
	result, err := promResult(addr, q)
	if err != nil {
		return 0, err
	}
	if len(result) != 1 {
		return 0, fmt.Errorf("%s: %d samples", q, len(result))
	}
	s, _ := result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// promSeries counts the series an instant query returns.
func promSeries(addr, q string) (int, error) {
	result, err := promResult(addr, q)
	return len(result), err
}

type promSample struct {
	Value [2]any
}

// promResult evaluates an instant query.
func promResult(addr, q string) ([]promSample, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []promSample
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, r.Status)
	}
	return r.Data.Result, nil
}
