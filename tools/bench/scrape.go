package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/renumber/renumber/internal/metrics"
	"github.com/renumber/renumber/tools/world"
)

// The cost of guarded metrics: two agents side by side, one serving /metrics
// over HTTPS behind the token guard (--metrics-auth=kubernetes), one plain,
// each scraped every second; in the middle third a flood of made-up tokens
// hits the guarded one as fast as it answers. Their RSS every 10 s, and how
// many reviews the API server was asked for.

type scrapeCost struct {
	At        string    `json:"measuredAt"`
	Seconds   float64   `json:"seconds"`
	Scrapes   int       `json:"scrapesEach"`
	MadeUp    int       `json:"madeUpTokens"`
	Throttled int       `json:"throttled"`
	Reviews   float64   `json:"reviews"`
	Guarded   []float64 `json:"guardedRSSMiB"`
	Open      []float64 `json:"openRSSMiB"`
}

func runScrape(ctx context.Context, lasting time.Duration) (*scrapeCost, error) {
	agentBin, _, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("scrape: 2 nodes, a guarded and an open agent, scraped every second for %s", lasting)
	w, err := startInstalledWorld(ctx, 2)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return nil, err
	}
	addr := map[string]string{}
	for _, n := range w.Net.Nodes {
		addr[n.Name] = net.JoinHostPort(n.ControlAddr.String(), "9470")
	}
	guarded, err := w.StartAgent(ctx, agentBin, "node1", "--metrics-addr", addr["node1"], "--metrics-auth", "kubernetes")
	if err != nil {
		return nil, err
	}
	open, err := w.StartAgent(ctx, agentBin, "node2", "--metrics-addr", addr["node2"])
	if err != nil {
		return nil, err
	}
	for _, node := range []string{"node1", "node2"} {
		if err := reported(ctx, w, node, fresh(0)); err != nil {
			return nil, fmt.Errorf("scrape: %w", err)
		}
	}
	token, err := scraperToken(ctx, w)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url, token string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	s := &scrapeCost{At: time.Now().UTC().Format(time.RFC3339)}
	sample := func() {
		s.Guarded = append(s.Guarded, memory(guarded.Process.Pid).rss)
		s.Open = append(s.Open, memory(open.Process.Pid).rss)
	}
	sample()
	start := time.Now()
	nextScrape, nextSample := start, start.Add(10*time.Second)
	for time.Since(start) < lasting {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		now := time.Now()
		if now.After(nextScrape) {
			if code, _ := get("https://"+addr["node1"]+"/metrics", token); code != http.StatusOK {
				return nil, fmt.Errorf("scrape: the guarded agent answered the scraper %d", code)
			}
			if code, _ := get("http://"+addr["node2"]+"/metrics", ""); code != http.StatusOK {
				return nil, fmt.Errorf("scrape: the open agent answered %d", code)
			}
			s.Scrapes++
			nextScrape = nextScrape.Add(time.Second)
		}
		if now.After(nextSample) {
			sample()
			progress("scrape: guarded %.1f MiB, open %.1f MiB, %d made-up tokens", s.Guarded[len(s.Guarded)-1], s.Open[len(s.Open)-1], s.MadeUp)
			nextSample = nextSample.Add(10 * time.Second)
		}
		if el := time.Since(start); el > lasting/3 && el < 2*lasting/3 {
			s.MadeUp++
			if code, _ := get("https://"+addr["node1"]+"/metrics", fmt.Sprintf("made-up-%d", s.MadeUp)); code == http.StatusTooManyRequests {
				s.Throttled++
			}
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Seconds = time.Since(start).Seconds()
	sample()
	_, body := get("https://"+addr["node1"]+"/metrics", token)
	s.Reviews, _ = world.MetricSample(body, "renumber_agent_metrics_reviews_total")
	return s, nil
}

// scraperToken is a token for the audience renumber-metrics of a
// ServiceAccount bound to renumber-metrics-reader.
func scraperToken(ctx context.Context, w *world.World) (string, error) {
	if _, err := w.API.Client.CoreV1().ServiceAccounts(world.Namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-scraper"}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := w.API.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "renumber-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "bench-scraper", Namespace: world.Namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := w.API.Client.CoreV1().ServiceAccounts(world.Namespace).CreateToken(ctx, "bench-scraper", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{metrics.Audience}, ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

func writeScrape(b *strings.Builder, s *scrapeCost) {
	fmt.Fprintf(b, "\n## Guarded metrics (measured %s)\n\n", s.At)
	fmt.Fprintf(b, "Two agents side by side for %.0f s, each scraped every second (%d scrapes each): one over HTTPS behind the token guard (`--metrics-auth=kubernetes`), one plain. In the middle third, %d made-up tokens hit the guarded one as fast as it answered: %d got 429 without a review. The API server was asked %.0f reviews (TokenReview, and SubjectAccessReview when it named an identity) in all. RSS every 10 s:\n\n",
		s.Seconds, s.Scrapes, s.MadeUp, s.Throttled, s.Reviews)
	b.WriteString("| sample | guarded agent RSS MiB | open agent RSS MiB |\n|---|---|---|\n")
	for i := range s.Guarded {
		fmt.Fprintf(b, "| %d | %.1f | %.1f |\n", i, s.Guarded[i], s.Open[i])
	}
}
