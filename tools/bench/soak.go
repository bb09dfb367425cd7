package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/renumber/renumber/tools/world"
)

// The rotation soak: many renumberings in a row (each to a prefix the nodes
// never saw, valid for a minute so the kernel forgets them), then the same
// quiet as before; every process is measured before and after, each time
// after more than the Go runtime's forced-GC period (2 min) of quiet, so the
// heap figures are a collection's, not garbage's.

type soak struct {
	At      string      `json:"measuredAt"`
	Changes int         `json:"renumberings"`
	Seconds float64     `json:"renumberingSeconds"`
	Procs   []soakUsage `json:"processes"`
	// Heap is each process's heap in use (MiB) every soakEvery renumberings,
	// without the quiet: growth that levels off is a cache filling, growth
	// that keeps pace with the renumberings is a leak.
	Heap map[string][]float64 `json:"heapInuseMiBEvery50"`
}

const soakEvery = 50

type soakUsage struct {
	Name          string  `json:"name"`
	RSSBefore     float64 `json:"rssMiBBefore"`
	RSSAfter      float64 `json:"rssMiBAfter"`
	HeapBefore    float64 `json:"heapInuseMiBBefore"`
	HeapAfter     float64 `json:"heapInuseMiBAfter"`
	GoroutsBefore float64 `json:"goroutinesBefore"`
	GoroutsAfter  float64 `json:"goroutinesAfter"`
	ThreadsBefore float64 `json:"threadsBefore"`
	ThreadsAfter  float64 `json:"threadsAfter"`
	FDsBefore     int     `json:"fdsBefore"`
	FDsAfter      int     `json:"fdsAfter"`
}

const (
	soakQuiet = 150 * time.Second // > the runtime's forced GC every 2 min
	soakValid = time.Minute
)

// soakProc is one measured process: its pid and how to read its metrics.
type soakProc struct {
	name    string
	pid     int
	metrics func() ([]byte, error)
}

type sample struct {
	rss, heap, goroutines, threads float64
	fds                            int
}

func (p soakProc) sample() (sample, error) {
	body, err := p.metrics()
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", p.name, err)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	metric := func(name string) float64 {
		if v, ok := world.MetricSample(body, name); ok {
			return v
		}
		return -1
	}
	return sample{rss: memory(p.pid).rss, heap: metric("go_memstats_heap_inuse_bytes") / (1 << 20),
		goroutines: metric("go_goroutines"), threads: metric("go_threads"), fds: len(fds)}, nil
}

func runSoak(ctx context.Context, changes int) (*soak, error) {
	agentBin, writerBin, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("soak: starting the world (3 nodes, the same workload)")
	w, err := startInstalledWorld(ctx, 3)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	advert := func(i int) []world.Advert {
		ads := []world.Advert{{Prefix: fresh(i), Valid: soakValid, Preferred: soakValid / 2}}
		if i > 0 {
			ads = append(ads, world.Advert{Prefix: fresh(i - 1), Valid: soakValid, Preferred: 0})
		}
		return ads
	}
	if err := w.Net.Router.Advertise(ctx, advert(0)...); err != nil {
		return nil, err
	}
	if err := workload(ctx, w); err != nil {
		return nil, err
	}
	var procs []soakProc
	for _, n := range w.Net.Nodes {
		c, err := w.StartAgent(ctx, agentBin, n.Name)
		if err != nil {
			return nil, err
		}
		node := n
		procs = append(procs, soakProc{name: "agent-" + n.Name, pid: c.Process.Pid,
			metrics: func() ([]byte, error) { return node.Get("http://[::1]:9470/metrics") }})
	}
	// The write budget opened wide: a renumbering every second or two.
	wide := []string{"--budget-object-burst", "1000", "--budget-object-per-minute", "600", "--budget-total-burst", "20000", "--budget-total-per-minute", "12000"}
	for _, name := range []string{"writer-a", "writer-b"} {
		l, err := world.FreeAddr()
		if err != nil {
			return nil, err
		}
		c, err := w.StartWriter(ctx, writerBin, name, append(wide, "--metrics-addr", l, "--pprof")...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, soakProc{name: name, pid: c.Process.Pid, metrics: func() ([]byte, error) {
			// A heap profile with gc=1 runs a collection first: the heap
			// figure that follows is what is live.
			if _, err := get("http://" + l + "/debug/pprof/heap?gc=1"); err != nil {
				return nil, err
			}
			return get("http://" + l + "/metrics")
		}})
	}
	if err := waitAllPools(ctx, w, fresh(0)); err != nil {
		return nil, err
	}
	measure := func(what string) ([]sample, error) {
		progress("soak: %s quiet before measuring %s", soakQuiet, what)
		select {
		case <-time.After(soakQuiet):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var out []sample
		for _, p := range procs {
			s, err := p.sample()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	before, err := measure("the start")
	if err != nil {
		return nil, err
	}
	heap := map[string][]float64{}
	checkpoint := func() error {
		for _, p := range procs {
			s, err := p.sample()
			if err != nil {
				return err
			}
			heap[p.name] = append(heap[p.name], s.heap)
		}
		return nil
	}
	if err := checkpoint(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	for i := 1; i <= changes; i++ {
		if err := w.Net.Router.Advertise(ctx, advert(i)...); err != nil {
			return nil, err
		}
		if err := waitAllPools(ctx, w, fresh(i)); err != nil {
			return nil, err
		}
		if i%20 == 0 {
			progress("soak: %d/%d renumberings", i, changes)
		}
		if i%soakEvery == 0 {
			if err := checkpoint(); err != nil {
				return nil, err
			}
		}
	}
	s := &soak{At: time.Now().UTC().Format(time.RFC3339), Changes: changes, Seconds: time.Since(t0).Seconds(), Heap: heap}
	// The last prefixes leave the kernel (and the pools) when their minute runs out.
	after, err := measure("the end (the last prefixes expired meanwhile)")
	if err != nil {
		return nil, err
	}
	for i, p := range procs {
		b, a := before[i], after[i]
		s.Procs = append(s.Procs, soakUsage{Name: p.name, RSSBefore: b.rss, RSSAfter: a.rss, HeapBefore: b.heap, HeapAfter: a.heap,
			GoroutsBefore: b.goroutines, GoroutsAfter: a.goroutines, ThreadsBefore: b.threads, ThreadsAfter: a.threads,
			FDsBefore: b.fds, FDsAfter: a.fds})
	}
	return s, nil
}

func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func writeSoak(b *strings.Builder, s *soak) {
	fmt.Fprintf(b, "\n## Rotation soak (%d renumberings in %.0f s, measured %s)\n\n", s.Changes, s.Seconds, s.At)
	b.WriteString("Each process before and after, each time after 150 s of quiet: the Go runtime forces a GC every 2 min, and the writers' heap is read right after a collection they are asked for (a heap profile with gc=1; the agent serves no profiles). Goal: heap back within 1 MiB of the start.\n\n")
	b.WriteString("| process | RSS MiB before -> after | heap in use MiB | goroutines | threads | fds |\n|---|---|---|---|---|---|\n")
	for _, p := range s.Procs {
		fmt.Fprintf(b, "| %s | %.1f -> %.1f | %.1f -> %.1f | %.0f -> %.0f | %.0f -> %.0f | %d -> %d |\n", p.Name, p.RSSBefore, p.RSSAfter,
			p.HeapBefore, p.HeapAfter, p.GoroutsBefore, p.GoroutsAfter, p.ThreadsBefore, p.ThreadsAfter, p.FDsBefore, p.FDsAfter)
	}
	if len(s.Heap) > 0 {
		fmt.Fprintf(b, "\nHeap in use (MiB) every %d renumberings, read without the quiet (the writers' right after a collection):\n\n", soakEvery)
		for _, p := range s.Procs {
			var vs []string
			for _, v := range s.Heap[p.Name] {
				vs = append(vs, fmt.Sprintf("%.1f", v))
			}
			fmt.Fprintf(b, "- %s: %s\n", p.Name, strings.Join(vs, ", "))
		}
	}
}
