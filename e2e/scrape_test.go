package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/renumber/renumber/tools/world"
)

// TestRealNodesMetricsAreScrapedOnlyWithAToken: with the chart's defaults (agents on
// the node's IP, every process behind HTTPS with a certificate the chart's CA
// issues, and the token guard), a real Prometheus (built from the module
// proxy, make tools: Debian's lacks Kubernetes discovery) with the job of
// manifests/monitoring/scrape-config.yaml - verifying with the CA - and a
// token for the audience renumber-metrics of a ServiceAccount bound to
// renumber-metrics-reader scrapes every agent, writer and shadow Pod, and every
// panel of the dashboard shows data. Without a token, with a token not bound,
// with the same identity's token for the API server, or over plain HTTP, a
// scrape is refused; and the same job refuses a server whose certificate
// another CA issued for the same name, before it sends its token.
func TestRealNodesMetricsAreScrapedOnlyWithAToken(t *testing.T) {
	prometheus := prometheusBin(t)
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
		tokens[sa+" for the API server"] = id.Config.BearerToken
		tr, err := w.API.Client.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, sa, &authv1.TokenRequest{
			Spec: authv1.TokenRequestSpec{Audiences: []string{"renumber-metrics"}, ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens[sa] = tr.Status.Token
	}
	// The install's CA, as a scraper gets it: the ConfigMap's ca.crt.
	caMap, err := w.API.Client.CoreV1().ConfigMaps(world.Namespace).Get(ctx, "renumber-metrics-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(caMap.Data["ca.crt"])) {
		t.Fatalf("the ConfigMap renumber-metrics-ca holds no certificate: %q", caMap.Data["ca.crt"])
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
	// Every certificate verifies with the CA, for the name renumber-metrics.
	verifying := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "renumber-metrics"}}}
	get := func(url, token string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := verifying.Do(req)
		if err != nil {
			t.Logf("%s: %v", url, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, target := range targets {
		for who, want := range map[string]int{"": http.StatusUnauthorized, "made-up": http.StatusUnauthorized,
			"tenant": http.StatusForbidden, "prometheus for the API server": http.StatusUnauthorized, "prometheus": http.StatusOK} {
			token, ok := tokens[who]
			if !ok {
				token = who
			}
			if got := get("https://"+target+"/metrics", token); got != want {
				t.Errorf("%s/metrics with token %q: %d, want %d", target, who, got, want)
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
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tokenFile, []byte(tokens["prometheus"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte(caMap.Data["ca.crt"]), 0o644); err != nil {
		t.Fatal(err)
	}
	job := cfg["scrape_configs"].([]any)[0].(map[string]any)
	job["scrape_interval"] = "1s"
	job["kubernetes_sd_configs"].([]any)[0].(map[string]any)["kubeconfig_file"] = w.API.AdminFile
	job["authorization"].(map[string]any)["credentials_file"] = tokenFile
	job["tls_config"].(map[string]any)["ca_file"] = caFile
	if v, ok := job["tls_config"].(map[string]any)["insecure_skip_verify"]; ok {
		t.Errorf("the shipped job sets insecure_skip_verify: %v", v)
	}
	// An impostor on a scraped address: the same job's TLS and token
	// settings, aimed at a server whose certificate another CA issued for
	// the same name. It must be down, and never see the token.
	impostor, told := impostorServer(t)
	cfg["scrape_configs"] = append(cfg["scrape_configs"].([]any), map[string]any{
		"job_name": "impostor", "scrape_interval": "1s", "scheme": "https",
		"tls_config": job["tls_config"], "authorization": job["authorization"],
		"static_configs": []any{map[string]any{"targets": []any{impostor}}},
	})
	addr := startPrometheus(t, prometheus, dir, cfg)

	eventually(t, "every renumber Pod scraped and up", func() (bool, string) {
		up, err := promQuery(addr, `sum(up{job="renumber"})`)
		return err == nil && up == float64(len(targets)), fmt.Sprintf("%v of %d targets up (%v)", up, len(targets), err)
	})
	eventually(t, "the impostor scraped and down", func() (bool, string) {
		n, err := promQuery(addr, `count_over_time(up{job="impostor"}[1m])`)
		up, err2 := promQuery(addr, `max_over_time(up{job="impostor"}[1m])`)
		return err == nil && err2 == nil && n >= 2 && up == 0, fmt.Sprintf("%v scrapes, up at most %v (%v, %v)", n, up, err, err2)
	})
	if got := told.Load(); got != 0 {
		t.Errorf("the impostor was sent %d requests: Prometheus did not refuse its certificate", got)
	}
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

// prometheusBin is the real Prometheus (make tools); the tests that run it
// skip without it outside CI.
func prometheusBin(t *testing.T) string {
	t.Helper()
	prometheus, err := world.Bin("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus missing in CI: make tools builds it: %v", err)
		}
		t.Skipf("prometheus not built (make tools): %v", err)
	}
	return prometheus
}

// startPrometheus runs prometheus with configuration cfg, its files in dir,
// until the test ends (its log shown if the test failed), and returns the
// address of its API.
func startPrometheus(t *testing.T, prometheus, dir string, cfg map[string]any) string {
	t.Helper()
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
	return addr
}

// impostorServer serves metrics on loopback with a certificate for the name
// renumber-metrics that a CA of its own issued, and counts the requests it
// gets (a token among them, were the scraper fooled).
func impostorServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "renumber-metrics-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "renumber-metrics"}, DNSNames: []string{"renumber-metrics"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	told := &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		told.Add(1)
		_, _ = w.Write([]byte("renumber_agent_up 1\n"))
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}}},
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), told
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
