package metrics

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTextIsTheExpositionFormatSortedAndEscaped(t *testing.T) {
	writes := NewCounterVec("x_writes_total", "Writes by resource.", "resource", "code")
	writes.With("services", "200").Inc()
	writes.With("services", "200").Inc()
	writes.With(`pools "a\b"`+"\n", "409").Inc()
	errs := NewCounter("x_errors_total", "Errors.\nSecond line with a \\.")
	leader := NewGauge("x_is_leader", "1 while leading.")
	leader.Set(1)
	timings := NewGaugeVec("x_seconds", "Timings.", "setting")
	timings.With("retry").Set(2.5)
	timings.With("lease").Set(60)
	age := NewGaugeFunc("x_age_seconds", "Age.", func() float64 { return 0.125 })
	r := &Registry{collectors: []Collector{writes, errs, leader, timings, age}}

	want := `# HELP x_age_seconds Age.
# TYPE x_age_seconds gauge
x_age_seconds 0.125
# HELP x_errors_total Errors.\nSecond line with a \\.
# TYPE x_errors_total counter
x_errors_total 0
# HELP x_is_leader 1 while leading.
# TYPE x_is_leader gauge
x_is_leader 1
# HELP x_seconds Timings.
# TYPE x_seconds gauge
x_seconds{setting="lease"} 60
x_seconds{setting="retry"} 2.5
# HELP x_writes_total Writes by resource.
# TYPE x_writes_total counter
x_writes_total{resource="pools \"a\\b\"\n",code="409"} 1
x_writes_total{resource="services",code="200"} 2
`
	if diff := cmp.Diff(want, string(r.Text())); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
	if string(r.Text()) != want {
		t.Error("a second scrape of unchanged metrics differs from the first")
	}
}

// A histogram is written as Prometheus writes one: cumulative buckets in
// order of their bounds, +Inf last, then the sum and the count.
func TestHistogramIsCumulativeBucketsSumAndCount(t *testing.T) {
	h := NewHistogram("x_latency_seconds", "Latency.", 0.1, 0.5, 2)
	for _, v := range []float64{0.05, 0.1, 0.3, 1, 10} {
		h.Observe(v)
	}
	want := `# HELP x_latency_seconds Latency.
# TYPE x_latency_seconds histogram
x_latency_seconds_bucket{le="0.1"} 2
x_latency_seconds_bucket{le="0.5"} 3
x_latency_seconds_bucket{le="2"} 4
x_latency_seconds_bucket{le="+Inf"} 5
x_latency_seconds_sum 11.45
x_latency_seconds_count 5
`
	if diff := cmp.Diff(want, string((&Registry{collectors: []Collector{h}}).Text())); diff != "" {
		t.Errorf("scrape (-want +got):\n%s", diff)
	}
	if empty := string((&Registry{collectors: []Collector{NewHistogram("y_seconds", "Y.", 1)}}).Text()); !strings.Contains(empty, "y_seconds_bucket{le=\"+Inf\"} 0\ny_seconds_sum 0\ny_seconds_count 0\n") {
		t.Errorf("an empty histogram:\n%s", empty)
	}
}

func TestCountersCountEveryConcurrentIncrement(t *testing.T) {
	c := NewCounterVec("x_total", "X.", "who")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.With("a").Inc()
			}
		})
	}
	wg.Wait()
	if got := c.With("a").Value(); got != 8000 {
		t.Errorf("count = %d, want 8000", got)
	}
}

func TestWrongNumberOfLabelValuesPanicsNamingTheMetric(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "x_total") {
			t.Errorf("recovered %v, want a panic naming x_total", r)
		}
	}()
	NewCounterVec("x_total", "X.", "a", "b").With("only-one")
}

// promtool is Prometheus's own parser and linter: what it accepts, a Prometheus
// server scrapes.
func TestPromtoolAcceptsAWholeScrape(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool missing in CI: `make deps` installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (make deps)")
	}
	c := NewCounterVec("renumber_test_requests_total", "Requests.", "verb")
	c.With("get").Inc()
	h := NewHistogram("renumber_test_latency_seconds", "Latency.", 0.1, 1)
	h.Observe(0.3)
	srv := httptest.NewServer(NewRegistry(c, NewGauge("renumber_test_up", "Up."), h))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if got := resp.Header.Get("Content-Type"); got != ContentType {
		t.Errorf("Content-Type = %q, want %q", got, ContentType)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestProcessMetricsComeFromProc(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1234 104857600 2560 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	path := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	got, ok := readStat(path)
	want := stat{utime: 250, stime: 50, startTicks: 1234, vsize: 104857600, rssPages: 2560}
	if !ok || got != want {
		t.Errorf("readStat = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := readStat(filepath.Join(t.TempDir(), "missing")); ok {
		t.Error("a missing stat file was read")
	}
	text := string(NewRegistry().Text())
	for _, name := range []string{"process_resident_memory_bytes ", "process_cpu_seconds_total ", "process_start_time_seconds ", "go_goroutines "} {
		if !strings.Contains(text, "\n"+name) {
			t.Errorf("scrape lacks %s", name)
		}
	}
}
