package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/renumber/renumber/internal/digest"
	"github.com/renumber/renumber/tools/loadgen"
	"github.com/renumber/renumber/tools/world"
)

// scaleRow is the writer against one simulated cluster size.
type scaleRow struct {
	Nodes          int     `json:"nodes"`
	Services       int     `json:"services"`
	FollowingSvcs  int     `json:"followingServices"`
	StartToSyncMS  float64 `json:"writerStartToConvergedMillis"`
	SteadyRSSMiB   float64 `json:"steadyRssMiB"`
	SteadyAnonMiB  float64 `json:"steadyAnonRssMiB"`
	PeakRSSMiB     float64 `json:"peakRssMiB"`
	ReportSpreadMS float64 `json:"firstToLastDigestMillis"`
	FirstToPoolMS  float64 `json:"firstDigestToPoolPatchMillis"`
	LastToPoolMS   float64 `json:"lastDigestToPoolPatchMillis"`
	PoolWrites     []int   `json:"writesPerPool"`
	StatusWrites   int     `json:"statusWrites"`
	ServiceWrites  int     `json:"serviceWrites"`
	CPUPerDigestUS float64 `json:"writerCpuMicrosPerDigest"`
	HeapTop        string  `json:"heapTop"`
	CPUTop         string  `json:"cpuTop"`
	// Runs is the writer's memory in each run of this size (the other
	// columns are the first run's).
	Runs []memRun `json:"runs,omitempty"`
}

// memRun is the writer's memory in one run, MiB.
type memRun struct {
	SteadyRSS  float64 `json:"steadyRssMiB"`
	SteadyAnon float64 `json:"steadyAnonRssMiB"`
	Peak       float64 `json:"peakRssMiB"`
}

const (
	scaleServices  = 1000
	scaleFollowing = 100 // every 10th Service follows "home" in HA mode
	scaleWindow    = time.Second
	metricsPort    = "127.0.0.1:19471"
)

// digests of a simulated node before and after the change.
func scaleDigests() (before, after string) {
	a, b := netip.MustParsePrefix("2001:db8:1:100::/64"), netip.MustParsePrefix("2001:db8:2:200::/64")
	enc := func(ps ...digest.Prefix) string {
		v, err := digest.Encode(digest.Node{Links: []digest.Link{{Name: "eth0", Prefixes: ps}}})
		if err != nil {
			panic(err)
		}
		return v
	}
	return enc(digest.Prefix{Prefix: a, Sources: digest.SourceRA}),
		enc(digest.Prefix{Prefix: a, Sources: digest.SourceRA, Deprecated: true, Remaining: 1800},
			digest.Prefix{Prefix: b, Sources: digest.SourceRA})
}

// runScale measures each size runs times: memory varies from run to run with
// when the garbage collector ran, so it is reported as min/median/max.
func runScale(ctx context.Context, out string, sizes []int, runs int) ([]scaleRow, error) {
	writerBin, err := world.Bin("writer")
	if err != nil {
		return nil, err
	}
	var rows []scaleRow
	for _, n := range sizes {
		var first scaleRow
		for i := range runs {
			progress("scale %d: run %d of %d", n, i+1, runs)
			row, err := scaleOnce(ctx, writerBin, out, n)
			if err != nil {
				return rows, fmt.Errorf("%d nodes, run %d: %w", n, i+1, err)
			}
			if i == 0 {
				first = row
			}
			first.Runs = append(first.Runs, memRun{SteadyRSS: row.SteadyRSSMiB, SteadyAnon: row.SteadyAnonMiB, Peak: row.PeakRSSMiB})
		}
		rows = append(rows, first)
	}
	return rows, nil
}

// spread is "min / median / max" of what f picks from each run.
func spread(runs []memRun, f func(memRun) float64) string {
	var v []float64
	for _, r := range runs {
		v = append(v, f(r))
	}
	slices.Sort(v)
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f", v[0], v[len(v)/2], v[len(v)-1])
}

func scaleOnce(ctx context.Context, writerBin, out string, n int) (scaleRow, error) {
	row := scaleRow{Nodes: n, Services: scaleServices, FollowingSvcs: scaleFollowing}
	progress("scale %d: starting an API server (no network nodes)", n)
	w, err := startInstalledWorld(ctx, 0)
	if err != nil {
		return row, err
	}
	defer w.Close()
	if err := scaleWorkload(ctx, w); err != nil {
		return row, err
	}
	gen, err := loadgen.New(w.API.Admin, "sim-", 32)
	if err != nil {
		return row, err
	}
	before, after := scaleDigests()
	progress("scale %d: creating %d Nodes and %d Services", n, n, scaleServices)
	if err := gen.CreateNodes(ctx, n, before); err != nil {
		return row, err
	}

	t0 := time.Now()
	args := append([]string{"--pprof", "--metrics-addr", metricsPort}, strings.Fields(os.Getenv("BENCH_WRITER_ARGS"))...)
	writer, err := w.StartWriter(ctx, writerBin, "writer-a", args...)
	if err != nil {
		return row, err
	}
	if err := waitAllPools(ctx, w, netip.MustParsePrefix("2001:db8:1:100::/64")); err != nil {
		return row, err
	}
	row.StartToSyncMS = ms(time.Since(t0))
	time.Sleep(10 * time.Second)
	steady := memory(writer.Process.Pid)
	row.SteadyRSSMiB, row.SteadyAnonMiB = steady.rss, steady.anon
	heap := filepath.Join(out, "profiles", fmt.Sprintf("writer-heap-%d.pb.gz", n))
	if err := fetch(ctx, "/debug/pprof/heap", heap); err != nil {
		return row, err
	}
	row.HeapTop = top(heap, "-sample_index=inuse_space")

	progress("scale %d: every node reports a new prefix within %s", n, scaleWindow)
	m, err := w.API.Mark(ctx)
	if err != nil {
		return row, err
	}
	procs := map[string]*exec.Cmd{"writer": writer}
	cpu0 := cpuTimes(procs)
	cpuProfile := filepath.Join(out, "profiles", fmt.Sprintf("writer-cpu-%d.pb.gz", n))
	profiled := make(chan error, 1)
	go func() { profiled <- fetch(ctx, "/debug/pprof/profile?seconds=20", cpuProfile) }()
	time.Sleep(500 * time.Millisecond) // the profile has started
	if err := gen.Report(ctx, n, after, scaleWindow); err != nil {
		return row, err
	}
	if err := waitAllPools(ctx, w, netip.MustParsePrefix("2001:db8:2:200::/64")); err != nil {
		return row, err
	}
	if err := <-profiled; err != nil {
		return row, err
	}
	cpu1 := cpuTimes(procs)
	row.CPUTop = top(cpuProfile)
	row.CPUPerDigestUS = (cpu1["writer"] - cpu0["writer"]) * 1e6 / float64(n)
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		return row, err
	}
	var first, last, pool time.Time
	perPool := map[string]int{}
	for _, wr := range ws {
		switch {
		case wr.Resource == "nodes":
			if first.IsZero() || wr.At.Before(first) {
				first = wr.At
			}
			if wr.At.After(last) {
				last = wr.At
			}
		case wr.Resource == "ciliumloadbalancerippools":
			perPool[wr.Name]++
			if pool.IsZero() || wr.At.Before(pool) {
				pool = wr.At
			}
		case wr.Resource == "dynamicprefixes":
			row.StatusWrites++
		case wr.Resource == "services":
			row.ServiceWrites++
		}
	}
	for _, name := range []string{"home-0", "home-1"} {
		row.PoolWrites = append(row.PoolWrites, perPool[name])
	}
	row.ReportSpreadMS = ms(last.Sub(first))
	row.FirstToPoolMS = ms(pool.Sub(first))
	row.LastToPoolMS = ms(pool.Sub(last))
	row.PeakRSSMiB = memory(writer.Process.Pid).peak
	progress("scale %d: pools written %v times, %.0f ms after the last digest; writer %.1f MiB (peak %.1f)",
		n, row.PoolWrites, row.LastToPoolMS, row.SteadyRSSMiB, row.PeakRSSMiB)
	return row, nil
}

// scaleWorkload: DynamicPrefix "home" with a range and a subnet, a pool for
// each, and 1,000 Services (a third LoadBalancer) of which every 10th follows
// home in HA mode.
func scaleWorkload(ctx context.Context, w *world.World) error {
	if err := followedPrefix(ctx, w, "home", 0); err != nil {
		return err
	}
	gen, err := loadgen.New(w.API.Admin, "", 16) // a client without rate limits
	if err != nil {
		return err
	}
	svcs := gen.Client.CoreV1().Services("default")
	return loadgen.Each(ctx, scaleServices, 16, 0, func(ctx context.Context, i int) error {
		_, err := svcs.Create(ctx, benchService(i, scaleServices/scaleFollowing), metav1.CreateOptions{})
		return err
	})
}

// fetch saves a profile from the writer's metrics address.
func fetch(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsPort+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// top is the head of `go tool pprof -top` for a profile.
func top(file string, args ...string) string {
	cmd := exec.Command("go", append(append([]string{"tool", "pprof", "-top", "-nodecount=12"}, args...), file)...)
	b, err := cmd.Output()
	if err != nil {
		return "pprof: " + err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// Keep the summary ("Showing nodes accounting for ...") and the table.
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "Showing nodes") })
	if i < 0 {
		i = 0
	}
	return strings.Join(lines[i:], "\n")
}

func scaleNotes() []string {
	return []string{
		fmt.Sprintf("Scale: one writer (default budgets and timings, the shipped Deployment's GOGC and GOMEMLIMIT) against an API server holding N simulated Nodes (created and patched as the world admin by tools/loadgen, 32 concurrent clients), one DynamicPrefix with two pools, and %d Services of which %d follow it in HA mode. Every node then reports the new prefix, the i-th patch sent at i/N of %s; how long the API server took to accept them all is the digest spread column.", scaleServices, scaleFollowing, scaleWindow),
		"Scale: the time from the last digest to the pool patch is negative when the majority (and so the pool patch) came before the last node reported: the writer needs half the nodes, not all. Profiles are in bench/profiles/ (go tool pprof).",
	}
}

func writeScale(b *strings.Builder, at string, rows []scaleRow) {
	fmt.Fprintf(b, "\n## Scale: the writer against simulated Nodes (measured %s)\n\n", at)
	b.WriteString("| nodes | Services (following) | start -> converged | RSS steady (anonymous) / peak MiB, first run | digest spread | first / last digest -> pool patch | writes per pool (goal 1) | status, Service writes | writer CPU per digest |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %d | %d (%d) | %.1f s | %.1f (%.1f) / %.1f | %.0f ms | %.0f / %.0f ms | %v | %d, %d | %.0f µs |\n",
			r.Nodes, r.Services, r.FollowingSvcs, r.StartToSyncMS/1000, r.SteadyRSSMiB, r.SteadyAnonMiB, r.PeakRSSMiB, r.ReportSpreadMS,
			r.FirstToPoolMS, r.LastToPoolMS, r.PoolWrites, r.StatusWrites, r.ServiceWrites, r.CPUPerDigestUS)
	}
	b.WriteString("\nThe writer's memory over every run, MiB, min / median / max (goals at 5,000 Nodes: peak <= 56 on every run):\n\n| nodes | runs | RSS steady | anonymous steady | peak RSS |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %d | %d | %s | %s | %s |\n", r.Nodes, len(r.Runs),
			spread(r.Runs, func(m memRun) float64 { return m.SteadyRSS }),
			spread(r.Runs, func(m memRun) float64 { return m.SteadyAnon }),
			spread(r.Runs, func(m memRun) float64 { return m.Peak }))
	}
	for _, r := range rows {
		fmt.Fprintf(b, "\nWriter heap in use at %d nodes (pprof, top):\n\n```\n%s\n```\n", r.Nodes, r.HeapTop)
		fmt.Fprintf(b, "\nWriter CPU while %d nodes report (pprof, top):\n\n```\n%s\n```\n", r.Nodes, r.CPUTop)
	}
}
