package main

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/tools/world"
)

// The DNS source (acquisition.dns): one DynamicPrefix follows a name three
// real DNS servers (CoreDNS) answer with a TTL of one second, so the writer
// asks each about once a second. At steady state it must write nothing; each
// renumbering of the record on every server must reach the pool with one
// write to it and one to the status.

type dnsSource struct {
	At      string  `json:"measuredAt"`
	Seconds float64 `json:"steadySeconds"`
	TTL     float64 `json:"ttlSeconds"`
	// Questions are each server's from the writer in the steady window.
	Questions    []int          `json:"questionsPerServer"`
	SteadyWrites map[string]int `json:"steadyWrites"`
	WriterRSSMiB float64        `json:"writerRSSMiB"`
	WriterAnon   float64        `json:"writerAnonMiB"`
	WriterCPU    float64        `json:"writerCPUSecondsPerHour"`
	Changes      int            `json:"changes"`
	// LatencyMS: every server answers the new address -> the pool holds its
	// prefix (the TTL bounds it: the writer asks again when it runs out).
	LatencyMS []float64          `json:"latencyMillis"`
	WritesPer map[string]float64 `json:"writesPerChange"`
}

const dnsTTL = time.Second

// routerAddr is the router's address in the i-th public /48.
func routerAddr(i int) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x10, byte(i), 6: 0, 7: 0xff, 15: 1})
}

func runDNS(ctx context.Context, steadyFor time.Duration, changes int) (*dnsSource, error) {
	_, writerBin, err := binaries()
	if err != nil {
		return nil, err
	}
	progress("dns: 3 name servers (TTL %v), one DynamicPrefix, one pool; %v steady, %d changes", dnsTTL, steadyFor, changes)
	w, err := startInstalledWorld(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	const name = "router.example.net."
	var servers []*world.NameServer
	var addrs []any
	for i := range 3 {
		s, err := w.StartNameServer(ctx, fmt.Sprint("bench-", i), name, dnsTTL, routerAddr(0))
		if err != nil {
			return nil, err
		}
		servers, addrs = append(servers, s), append(addrs, s.Addr.String())
	}
	for _, o := range []map[string]any{
		{"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix", "metadata": map[string]any{"name": "public"},
			"spec": map[string]any{"acquisition": map[string]any{"dns": map[string]any{"name": name, "prefixLength": 48, "minInterval": "1s", "servers": addrs}}}},
		{"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool", "metadata": map[string]any{"name": "lb", "annotations": map[string]any{"dynamic-prefix.io/name": "public"}},
			"spec": map[string]any{"blocks": []any{map[string]any{"cidr": "192.0.2.0/24"}}}},
	} {
		u := &unstructured.Unstructured{Object: o}
		gvr := world.PoolGVR
		if u.GetKind() == "DynamicPrefix" {
			gvr = api.GVR
		}
		if _, err := w.API.Dynamic.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	writer, err := w.StartWriter(ctx, writerBin, "writer-a") // the shipped flags
	if err != nil {
		return nil, err
	}
	holds := func(i int) error {
		want := netip.PrefixFrom(routerAddr(i), 48).Masked().String()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			u, err := w.API.Dynamic.Resource(world.PoolGVR).Get(ctx, "lb", metav1.GetOptions{})
			if err == nil && slices.Contains(world.Blocks(u), want) {
				return nil
			}
		}
		return fmt.Errorf("dns: the pool never held %s (logs in %s)", want, w.Dir)
	}
	if err := holds(0); err != nil {
		return nil, err
	}
	time.Sleep(settleWindow)

	d := &dnsSource{At: time.Now().UTC().Format(time.RFC3339), TTL: dnsTTL.Seconds(), Changes: changes, SteadyWrites: map[string]int{}, WritesPer: map[string]float64{}}
	m, err := w.API.Mark(ctx)
	if err != nil {
		return nil, err
	}
	var before []int
	for _, s := range servers {
		n, _ := s.Questions()
		before = append(before, n)
	}
	cpu0, start := cpuTimes(map[string]*exec.Cmd{"writer": writer})["writer"], time.Now()
	time.Sleep(steadyFor)
	d.Seconds = time.Since(start).Seconds()
	d.WriterCPU = (cpuTimes(map[string]*exec.Cmd{"writer": writer})["writer"] - cpu0) / d.Seconds * 3600
	mem := memory(writer.Process.Pid)
	d.WriterRSSMiB, d.WriterAnon = mem.rss, mem.anon
	for i, s := range servers {
		n, _ := s.Questions()
		d.Questions = append(d.Questions, n-before[i])
	}
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		return nil, err
	}
	for _, wr := range world.Filter(ws, world.ByUser("system:serviceaccount:renumber-system:renumber-writer")) {
		if wr.Resource != "leases" {
			d.SteadyWrites[wr.Verb+" "+wr.Resource]++
		}
	}
	progress("dns: steady %.0f s: %v questions per server, writes %v", d.Seconds, d.Questions, d.SteadyWrites)

	m, err = w.API.Mark(ctx)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= changes; i++ {
		t0 := time.Now()
		for _, s := range servers {
			if err := s.Answer(ctx, routerAddr(i)); err != nil {
				return nil, err
			}
		}
		if err := holds(i); err != nil {
			return nil, err
		}
		d.LatencyMS = append(d.LatencyMS, ms(time.Since(t0)))
		time.Sleep(settleWindow)
	}
	ws, err = w.API.WritesSince(ctx, m)
	if err != nil {
		return nil, err
	}
	for _, wr := range world.Filter(ws, world.ByUser("system:serviceaccount:renumber-system:renumber-writer")) {
		if wr.Resource != "leases" && wr.Resource != "events" {
			d.WritesPer[strings.TrimSuffix(wr.Resource+"/"+wr.Subresource, "/")] += 1.0 / float64(changes)
		}
	}
	progress("dns: %d changes, p50 %.0f ms, writes per change %v", changes, percentile(d.LatencyMS, 50), d.WritesPer)
	return d, nil
}

func writeDNS(b *strings.Builder, d *dnsSource) {
	fmt.Fprintf(b, "\n## DNS source (measured %s)\n\n", d.At)
	fmt.Fprintf(b, "One DynamicPrefix follows a name three CoreDNS servers answer with a TTL of %.0f s (minInterval 1s): the writer asks each about once a second.\n\n", d.TTL)
	fmt.Fprintf(b, "| | measured | goal |\n|---|---|---|\n")
	fmt.Fprintf(b, "| writes in %.0f s of asking, besides the Lease | %s | none |\n", d.Seconds, orNone(d.SteadyWrites))
	fmt.Fprintf(b, "| questions per server in that window | %v | at most one per TTL |\n", d.Questions)
	fmt.Fprintf(b, "| writer RSS (anonymous) / CPU while asking | %.1f MiB (%.1f MiB) / %.1f s per hour | |\n", d.WriterRSSMiB, d.WriterAnon, d.WriterCPU)
	fmt.Fprintf(b, "| record renumbered on every server -> pool holds the new prefix, p50 / p99 (%d changes) | %.0f ms / %.0f ms | within the TTL and a pass |\n", d.Changes, percentile(d.LatencyMS, 50), percentile(d.LatencyMS, 99))
	var per []string
	for k, v := range d.WritesPer {
		per = append(per, fmt.Sprintf("%s %.2f", k, v))
	}
	slices.Sort(per)
	fmt.Fprintf(b, "| writes per change | %s | one per object |\n", strings.Join(per, ", "))
	b.WriteString("\nThe servers take the new record one after another, as a primary and its secondaries do: a question that finds some with it and some without is a dissent the status names (a status write of its own) before the majority moves the prefix.\n")
}

func orNone(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	return fmt.Sprint(m)
}
