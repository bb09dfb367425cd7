package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// TestAgentMetricsAreScrapedWithTheShippedConfig: a real Prometheus (built
// from the module proxy, make tools: Debian's lacks Kubernetes discovery) with the job of manifests/monitoring/scrape-config.yaml, given
// only a kubeconfig to discover Pods from outside the cluster, scrapes the
// agents the chart runs with agent.metricsOnNode on real nodes: every agent
// Pod is a target that is up, and the digest publish latency histogram has
// counted the first digest of each.
func TestAgentMetricsAreScrapedWithTheShippedConfig(t *testing.T) {
	prometheus, err := world.Bin("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus missing in CI: make tools builds it: %v", err)
		}
		t.Skipf("prometheus not built (make tools): %v", err)
	}
	w := realWorld(t, 2, "helm", "agent.metricsOnNode=true")
	renumbered(t, w, prefixA.String())

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
	// a scrape every second. Nothing else of the shipped job changes.
	job := cfg["scrape_configs"].([]any)[0].(map[string]any)
	job["scrape_interval"] = "1s"
	job["kubernetes_sd_configs"].([]any)[0].(map[string]any)["kubeconfig_file"] = w.API.AdminFile
	dir := t.TempDir()
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

	agents := len(pods(t, w, "renumber-agent"))
	eventually(t, "every agent Pod scraped and up", func() (bool, string) {
		up, err := promQuery(addr, `sum(up{job="renumber",app="renumber-agent"})`)
		return err == nil && up == float64(agents), fmt.Sprintf("%v agents up of %d (%v)", up, agents, err)
	})
	eventually(t, "the publish latency of every agent's digest", func() (bool, string) {
		n, err := promQuery(addr, `count(renumber_agent_digest_publish_seconds_count{job="renumber"} >= 1)`)
		pub, _ := promQuery(addr, `sum(renumber_agent_digest_publishes_total{job="renumber"})`)
		lat, _ := promQuery(addr, `sum(renumber_agent_digest_publish_seconds_count{job="renumber"})`)
		return err == nil && n == float64(agents), fmt.Sprintf("%v agents with a latency (%v); %v publishes, %v latencies", n, err, pub, lat)
	})
}

// promQuery evaluates an instant query that returns one sample.
func promQuery(addr, q string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %s, %d samples", q, r.Status, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
