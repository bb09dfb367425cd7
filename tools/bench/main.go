// Command bench measures what renumber exists for, in the local world (real API
// server, real radvd, agents in node namespaces, two writers): API writes at
// steady state and per prefix change (audit log, by identity), the latency of a
// change from the router to the pool, memory and CPU of agent and writer, and
// binary sizes. It writes bench/results.md and bench/results.json.
//
//	bench [-only steady|change|size] [-steady 10m] [-changes 20] [-router-answers unicast|multicast|both]
//
// Numbers are measurements, not assertions: nothing here fails on a slow machine.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/renumber/renumber/tools/world"
)

type results struct {
	Date     string            `json:"date"`
	Machine  map[string]string `json:"machine"`
	Versions map[string]string `json:"versions"`
	Steady   *steady           `json:"steady,omitempty"`
	Change   *change           `json:"change,omitempty"` // radvd answering solicitations unicast
	Procs    []proc            `json:"processes,omitempty"`
	Sizes    map[string]int64  `json:"binarySizes,omitempty"`
	Layers   map[string]int64  `json:"imageLayerSizes,omitempty"`
	ScaleAt  string            `json:"scaleMeasuredAt,omitempty"`
	Scale    []scaleRow        `json:"scale,omitempty"`
	Soak     *soak             `json:"soak,omitempty"`
	Burst    *burst            `json:"burst,omitempty"`
	Flood    *flood            `json:"flood,omitempty"`
	Scrape   *scrapeCost       `json:"scrape,omitempty"`
	Idle     *idleCost         `json:"idle,omitempty"`
	DNS      *dnsSource        `json:"dns,omitempty"`
	Answer   *dnsAnswer        `json:"dnsAnswer,omitempty"`
	Notes    []string          `json:"notes"`

	// ChangeMulticast is Change with radvd answering solicitations to all nodes.
	ChangeMulticast *change `json:"changeMulticast,omitempty"`
	// StartupMS: from starting the agents and writers in the fresh world to
	// every pool holding the router's prefix (the change benchmark's world).
	StartupMS float64 `json:"launchToPoolsMillis,omitempty"`
	// Corroboration is the agents' --corroboration ("" their default);
	// RAIntervals radvd's Min/MaxRtrAdvInterval in seconds.
	Corroboration string `json:"corroboration,omitempty"`
	RAIntervals   string `json:"raIntervals,omitempty"`
}

type steady struct {
	At           string         `json:"measuredAt"`
	Seconds      float64        `json:"seconds"`
	WritesByWho  map[string]int `json:"writesByIdentityAndResource"`
	LeaseRenews  int            `json:"leaseRenewals"`
	RetryPeriod  float64        `json:"retryPeriodSeconds"`
	OtherPerSec  float64        `json:"otherWritesPerSecond"`
	LeasesPerSec float64        `json:"leaseWritesPerSecond"`
}

type change struct {
	Answers      string         `json:"routerAnswers"` // unicast or multicast (answerModes)
	At           string         `json:"measuredAt"`
	Changes      int            `json:"changes"`
	WritesByWho  map[string]int `json:"writesByIdentityAndResourceTotal"`
	MinimumPer   int            `json:"minimumWritesPerChange"`
	ObjectPer    float64        `json:"objectWritesPerChange"`
	LatencyMS    []float64      `json:"latencyMillis"`
	RAToDigestMS []float64      `json:"sighupToTippingDigestMillis"`
	DigestToPool []float64      `json:"tippingDigestToPoolPatchMillis"`
}

type proc struct {
	Name       string  `json:"name"`
	RSSMiB     float64 `json:"rssMiB"`
	PeakMiB    float64 `json:"peakRssMiB"`
	AnonMiB    float64 `json:"anonRssMiB"`
	FileMiB    float64 `json:"fileRssMiB"`
	CPUSecHour float64 `json:"cpuSecondsPerHour"`
}

func main() {
	only := flag.String("only", os.Getenv("BENCH"), "run one benchmark: steady (writes, memory), change (latency), scale, size, soak, burst, flood, scrape, idle, dns or answer (default all)")
	floodFor := flag.Duration("flood", time.Minute, "how long the RA flood lasts")
	scrapeFor := flag.Duration("scrape", 90*time.Second, "how long the guarded and the open agent are scraped")
	idleConns := flag.Int("idle", 5000, "how many idle TLS connections one host opens to an agent's metrics port")
	dnsFor := flag.Duration("dns", 2*time.Minute, "how long the DNS source is watched asking with nothing changed")
	soakChanges := flag.Int("soak", 200, "renumberings in the rotation soak")
	scaleSizes := flag.String("scale", "1000,5000", "simulated cluster sizes for the scale benchmark")
	steadyFor := flag.Duration("steady", 10*time.Minute, "steady-state window")
	changes := flag.Int("changes", 20, "prefix changes to measure")
	corroboration := flag.String("corroboration", "", "the agents' --corroboration margin (default: theirs)")
	raIntervals := flag.String("ra-intervals", "3-4", "radvd's MinRtrAdvInterval-MaxRtrAdvInterval in seconds (3-4: RFC 4861's least, the tests'; 198-600: radvd's default)")
	answers := flag.String("router-answers", "both", "how radvd answers a Router Solicitation in the change benchmark: unicast (radvd's default), multicast (AdvRASolicitedUnicast off) or both, each measured in its own section")
	runs := flag.Int("runs", 3, "runs of each scale size (memory is reported as min/median/max)")
	out := flag.String("out", "bench", "directory for results.md and results.json")
	flag.Parse()
	name, ok := benchmarks[*only]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: no benchmark %q: steady (also: writes, memory), change (also: latency), scale, size, soak, burst, flood, scrape, idle, dns, answer\n", *only)
		os.Exit(2)
	}
	*only = name
	if *answers != "both" && *answers != answersUnicast && *answers != answersMulticast {
		fmt.Fprintf(os.Stderr, "bench: no router answer mode %q: unicast, multicast or both\n", *answers)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &results{}
	if *only != "" {
		// One benchmark alone updates its section of the existing results.
		if b, err := os.ReadFile(filepath.Join(*out, "results.json")); err == nil {
			_ = json.Unmarshal(b, r)
		}
	}
	r.Date, r.Machine, r.Versions, r.Notes = time.Now().UTC().Format(time.RFC3339), machine(), versions(), nil
	var sizes []int
	for _, f := range strings.Split(*scaleSizes, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "bench: bad -scale:", f)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	r.Corroboration, r.RAIntervals = *corroboration, *raIntervals
	if err := run(ctx, r, *only, *steadyFor, *changes, *answers); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *only == "" || *only == "soak" {
		s, err := runSoak(ctx, *soakChanges)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Soak = s
	}
	if *only == "" || *only == "burst" {
		b, err := runBurst(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Burst = b
	}
	if *only == "" || *only == "flood" {
		f, err := runFlood(ctx, *floodFor)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Flood = f
	}
	if *only == "" || *only == "scrape" {
		s, err := runScrape(ctx, *scrapeFor)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Scrape = s
	}
	if *only == "" || *only == "idle" {
		c, err := runIdle(ctx, *idleConns)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Idle = c
	}
	if *only == "" || *only == "dns" {
		d, err := runDNS(ctx, *dnsFor, 10)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.DNS = d
	}
	if *only == "" || *only == "answer" {
		a, err := runAnswer(ctx, *changes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.Answer = a
	}
	if *only == "" || *only == "scale" {
		rows, err := runScale(ctx, *out, sizes, max(*runs, 1))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		r.ScaleAt, r.Scale = time.Now().UTC().Format(time.RFC3339), rows
	}
	r.Notes = notes(r)
	if err := write(r, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Printf("results in %s/results.md\n", *out)
}

// benchmarks maps the names BENCH accepts to the section that measures them:
// steady-state writes, memory and CPU are measured together, and so are a
// change's writes and latency.
var benchmarks = map[string]string{
	"": "", "steady": "steady", "writes": "steady", "memory": "steady",
	"change": "change", "latency": "change", "scale": "scale", "size": "size", "soak": "soak", "burst": "burst", "flood": "flood", "scrape": "scrape", "idle": "idle", "dns": "dns",
	"answer": "answer",
}

func progress(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}

const (
	dps          = 3
	poolsPerDP   = 2
	services     = 100
	haServices   = 10 // every 10th Service follows "home" in HA mode
	retryPeriod  = 5 * time.Second
	settleWindow = 6 * time.Second
)

// fresh returns the i-th prefix of the run: every change moves to a prefix the
// nodes have never seen, as an ISP renumbering does (SLAAC and DAD run on every
// change).
func fresh(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x:100::/64", i+1))
}

func run(ctx context.Context, r *results, only string, steadyFor time.Duration, changes int, answers string) error {
	if only == "" || only == "size" {
		r.Sizes, r.Layers = sizes()
		if only == "size" {
			return nil
		}
	}
	if only == "scale" || only == "soak" || only == "burst" || only == "flood" || only == "scrape" || only == "idle" || only == "dns" || only == "answer" {
		return nil
	}
	agentBin, writerBin, err := binaries()
	if err != nil {
		return err
	}
	progress("starting the world: 3 nodes, %d DynamicPrefixes, %d pools, %d Services", dps, dps*poolsPerDP, services)
	w, err := startInstalledWorld(ctx, 3)
	if err != nil {
		return err
	}
	defer w.Close()
	if r.Corroboration != "" {
		w.AgentArgs = []string{"--corroboration", r.Corroboration}
	}
	if w.Net.Router.Intervals, err = parseIntervals(r.RAIntervals); err != nil {
		return err
	}
	if err := w.Net.Router.Advertise(ctx, world.Advert{Prefix: fresh(0), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}); err != nil {
		return err
	}
	if err := workload(ctx, w); err != nil {
		return err
	}
	// A change every ~8 s is far beyond the default write budget (burst 5, then
	// 2/min per object), which would throttle the later changes: the bench
	// measures one change's cost, so its writers get a budget that admits its pace.
	launched := time.Now()
	procs, err := w.StartAll(ctx, agentBin, writerBin, []string{"--budget-object-burst", "100", "--budget-object-per-minute", "60",
		"--budget-total-burst", "2000", "--budget-total-per-minute", "1200"}, "writer-a", "writer-b")
	if err != nil {
		return err
	}
	if err := waitAllPools(ctx, w, fresh(0)); err != nil {
		return err
	}
	r.StartupMS = ms(time.Since(launched))
	progress("converged on %s %s after launch", fresh(0), time.Since(launched).Round(time.Millisecond))
	time.Sleep(settleWindow)

	if only == "" || only == "steady" {
		cpu0 := cpuTimes(procs)
		t0 := time.Now()
		m, err := w.API.Mark(ctx)
		if err != nil {
			return err
		}
		progress("steady state: watching writes for %s (RAs every 3-4 s)", steadyFor)
		select {
		case <-time.After(steadyFor):
		case <-ctx.Done():
			return ctx.Err()
		}
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			return err
		}
		elapsed := time.Since(t0)
		s := &steady{At: time.Now().UTC().Format(time.RFC3339), Seconds: elapsed.Seconds(), WritesByWho: tally(ws), RetryPeriod: retryPeriod.Seconds()}
		other := 0
		for _, wr := range ws {
			if wr.Resource == "leases" {
				s.LeaseRenews++
			} else {
				other++
			}
		}
		s.LeasesPerSec = float64(s.LeaseRenews) / elapsed.Seconds()
		s.OtherPerSec = float64(other) / elapsed.Seconds()
		r.Steady = s
		r.Procs = nil
		cpu1 := cpuTimes(procs)
		for name, c := range procs {
			m := memory(c.Process.Pid)
			r.Procs = append(r.Procs, proc{Name: name, RSSMiB: m.rss, PeakMiB: m.peak, AnonMiB: m.anon, FileMiB: m.file,
				CPUSecHour: (cpu1[name] - cpu0[name]) / elapsed.Hours()})
		}
		sort.Slice(r.Procs, func(i, j int) bool { return r.Procs[i].Name < r.Procs[j].Name })
		progress("steady: %d lease renewals, %.3f other writes/s", s.LeaseRenews, s.OtherPerSec)
	}

	if only == "" || only == "change" {
		// Each mode moves on from where the last left the router.
		at := 0
		for _, mode := range answerModes(answers) {
			var restart func() error
			if at > 0 {
				// Agents that learnt how radvd answered in the last mode would
				// carry it over: each mode is measured by agents that learn it
				// afresh, as on a router that never changes its mode.
				restart = func() error { return restartAgents(ctx, w, procs, agentBin) }
			}
			c, err := measureChanges(ctx, w, mode, at, changes, restart)
			if err != nil {
				return err
			}
			at += changes
			if mode == answersMulticast {
				r.ChangeMulticast = c
			} else {
				r.Change = c
			}
		}
	}
	return nil
}

// parseIntervals reads -ra-intervals: "min-max" in seconds.
func parseIntervals(s string) ([2]time.Duration, error) {
	lo, hi, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseFloat(lo, 64)
	b, err2 := strconv.ParseFloat(hi, 64)
	if !ok || err1 != nil || err2 != nil || a < 3 || b < a {
		return [2]time.Duration{}, fmt.Errorf("bench: -ra-intervals %q: want min-max in seconds, 3 <= min <= max", s)
	}
	return [2]time.Duration{time.Duration(a * float64(time.Second)), time.Duration(b * float64(time.Second))}, nil
}

// The ways a router answers a Router Solicitation (-router-answers): radvd's
// default, unicast to the soliciting node at once, and AdvRASolicitedUnicast
// off, to all nodes, which RFC 4861 6.2.6 lets wait until 3 s after its last
// multicast RA (plus up to 0.5 s). The agent fits its corroboration window to
// which one it hears, so a change's latency depends on it.
const (
	answersUnicast   = "unicast"
	answersMulticast = "multicast"
)

// answerModes returns the modes -router-answers names (both: unicast first).
func answerModes(answers string) []string {
	if answers == "both" {
		return []string{answersUnicast, answersMulticast}
	}
	return []string{answers}
}

// restartAgents stops every node's agent and starts it again.
func restartAgents(ctx context.Context, w *world.World, procs map[string]*exec.Cmd, agentBin string) error {
	for _, n := range w.Net.Nodes {
		w.Stop(procs["agent-"+n.Name], 5*time.Second)
		c, err := w.StartAgent(ctx, agentBin, n.Name)
		if err != nil {
			return err
		}
		procs["agent-"+n.Name] = c
	}
	return nil
}

// measureChanges sets radvd to answer solicitations as mode says, then makes
// changes renumberings from fresh(from) on, measuring each one's latency and
// writes. restart, if given, restarts the agents once radvd answers so.
func measureChanges(ctx context.Context, w *world.World, mode string, from, changes int, restart func() error) (*change, error) {
	w.Net.Router.MulticastAnswers = mode == answersMulticast
	// What radvd advertises now, reloaded with the mode: the agents see no change.
	ads := []world.Advert{{Prefix: fresh(from), Valid: 30 * time.Minute, Preferred: 20 * time.Minute}}
	if from > 0 {
		ads = append(ads, world.Advert{Prefix: fresh(from - 1), Valid: 30 * time.Minute, Preferred: 0})
	}
	if err := w.Net.Router.Advertise(ctx, ads...); err != nil {
		return nil, err
	}
	if restart != nil {
		if err := restart(); err != nil {
			return nil, err
		}
	}
	// Long enough for restarted agents to start and believe the offer.
	time.Sleep(2 * settleWindow)
	c := &change{Answers: mode, At: time.Now().UTC().Format(time.RFC3339), Changes: changes, WritesByWho: map[string]int{}, MinimumPer: 3 + dps*poolsPerDP + dps + haServices}
	for i := range changes {
		cur, next := fresh(from+i), fresh(from+i+1)
		m, err := w.API.Mark(ctx)
		if err != nil {
			return nil, err
		}
		// Watch pool home-0 from its current version: the new prefix must become
		// its current entry (the first after the user's block); on a flip back the
		// old block is already there, draining.
		pool, err := w.API.Dynamic.Resource(world.PoolGVR).Get(ctx, "home-0", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		watcher, err := w.API.Dynamic.Resource(world.PoolGVR).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=home-0", ResourceVersion: pool.GetResourceVersion()})
		if err != nil {
			return nil, err
		}
		sighup := time.Now()
		if err := w.Net.Router.Advertise(ctx,
			world.Advert{Prefix: next, Valid: 30 * time.Minute, Preferred: 20 * time.Minute},
			world.Advert{Prefix: cur, Valid: 30 * time.Minute, Preferred: 0},
		); err != nil {
			return nil, err
		}
		lat, err := firstPoolWith(ctx, watcher, homeRange(next), sighup)
		watcher.Stop()
		if err != nil {
			return nil, err
		}
		time.Sleep(settleWindow)
		ws, err := w.API.WritesSince(ctx, m)
		if err != nil {
			return nil, err
		}
		objects := 0
		var firstPool time.Time
		var digests []time.Time
		for k, v := range tally(ws) {
			c.WritesByWho[k] += v
		}
		for _, wr := range ws {
			switch {
			case wr.Resource == "nodes":
				digests = append(digests, wr.At)
			case wr.Resource == "ciliumloadbalancerippools" && firstPool.IsZero():
				firstPool = wr.At
			}
			if wr.Resource != "leases" && wr.Resource != "events" {
				objects++
			}
		}
		// The digest that tipped the majority: the last one before the first
		// pool patch (the pool need not wait for every node).
		var tipping time.Time
		for _, at := range digests {
			if at.Before(firstPool) && at.After(tipping) {
				tipping = at
			}
		}
		if !tipping.IsZero() && !firstPool.IsZero() {
			c.RAToDigestMS = append(c.RAToDigestMS, ms(tipping.Sub(sighup)))
			c.DigestToPool = append(c.DigestToPool, ms(firstPool.Sub(tipping)))
		}
		c.ObjectPer += float64(objects) / float64(changes)
		c.LatencyMS = append(c.LatencyMS, ms(lat))
		progress("change %d/%d (%s answers): %s -> %s in %s, %d object writes", i+1, changes, mode, cur, next, lat.Round(time.Millisecond), objects)
	}
	return c, nil
}

// binaries are the agent and writer the bench runs (make build).
func binaries() (agent, writer string, err error) {
	if agent, err = world.Bin("agent"); err != nil {
		return "", "", err
	}
	writer, err = world.Bin("writer")
	return agent, writer, err
}

// notes are the caveats printed under the tables.
func notes(r *results) []string {
	out := []string{
		fmt.Sprintf("%d Services (a third LoadBalancer); %d of them follow DynamicPrefix home in HA mode (lbipam.cilium.io/ips and external-dns target).", services, haServices),
		"Latency: from just before radvd's SIGHUP to the first watch event of pool home-0 whose current entry is the new prefix's range. Every change moves to a prefix the nodes never saw. It includes radvd sending its first RA after the reload, the agents' corroboration (a Router Solicitation, radvd's answer, then the window fitted to how the router answers solicitations: one answering unicast has answered by 0.5 s after the solicitation, one answering all nodes by 3.5 s after its last multicast RA; each plus the margin, --corroboration, in which nobody on the router's address may contradict the change) and both debounces (100 ms each); not DAD: the agent publishes on the RA (a SLAAC address forming ~2 s later does not change the digest). radvd answering to all nodes holds a rate-limited answer min(16 s, MaxRtrAdvInterval) after the solicitation during its first three RAs after a reload (reschedule_iface), past RFC 4861's 3.5 s: that row measures radvd's delay.",
		"Older prefixes stay valid on the nodes (30 min) but leave the pools after maxPrefixHistory (2) newer ones.",
		"Binaries are built as the Dockerfiles build them (static, no cgo).",
		"The writers run with a write budget raised for the bench's pace (per object burst 100, 60/min; total burst 2000, 1200/min): with the defaults (per object 5 + 2/min, total 200 + 60/min) a change every ~8 s is throttled after a few changes, by design.",
	}
	if r.Scale != nil {
		out = append(out, scaleNotes()...)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func tally(ws []world.Write) map[string]int {
	out := map[string]int{}
	for _, w := range ws {
		who := strings.TrimPrefix(w.User, "system:serviceaccount:renumber-system:")
		res := w.Resource
		if w.Subresource != "" {
			res += "/" + w.Subresource
		}
		out[who+" "+w.Verb+" "+res]++
	}
	return out
}

func workload(ctx context.Context, w *world.World) error {
	for i, n := range []string{"home", "lab", "guest"} {
		if err := followedPrefix(ctx, w, n, i); err != nil {
			return err
		}
	}
	for i := range services {
		if _, err := w.API.Client.CoreV1().Services("default").Create(ctx, benchService(i, services/haServices), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// followedPrefix creates the i-th DynamicPrefix (HA mode, a range ::X000:0:0:0/68
// with X = d+i, a /112 subnet at offset i+1) and two pools following it,
// <name>-0 (the range) and <name>-1 (the subnet), each with a user IPv4 block.
func followedPrefix(ctx context.Context, w *world.World, name string, i int) error {
	dp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dynamic-prefix.io/v1alpha1", "kind": "DynamicPrefix",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"acquisition":   map[string]any{"routerAdvertisement": map[string]any{"interface": "eth0"}},
			"addressRanges": []any{map[string]any{"name": "lb", "start": fmt.Sprintf("::%x000:0:0:0", 0xd+i), "end": fmt.Sprintf("::%xfff:ffff:ffff:ffff", 0xd+i)}},
			"subnets":       []any{map[string]any{"name": "svc", "offset": i + 1, "prefixLength": 112}},
			"transition":    map[string]any{"mode": "ha"},
		},
	}}
	if _, err := w.API.Dynamic.Resource(dpGVR).Create(ctx, dp, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j, follow := range []map[string]any{{"dynamic-prefix.io/address-range": "lb"}, {"dynamic-prefix.io/subnet": "svc"}} {
		follow["dynamic-prefix.io/name"] = name
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumLoadBalancerIPPool",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, j), "annotations": follow},
			"spec":     map[string]any{"blocks": []any{map[string]any{"cidr": fmt.Sprintf("192.0.2.%d/32", 10*i+j)}}},
		}}
		if _, err := w.API.Dynamic.Resource(world.PoolGVR).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// benchService is the i-th Service of a workload: a third LoadBalancer, and
// every every-th one following "home" in HA mode with its own suffix.
func benchService(i, every int) *corev1.Service {
	typ := corev1.ServiceTypeClusterIP
	if i%3 == 0 {
		typ = corev1.ServiceTypeLoadBalancer
	}
	var ann map[string]string
	if i%every == 0 {
		typ = corev1.ServiceTypeLoadBalancer
		ann = map[string]string{"dynamic-prefix.io/name": "home", "dynamic-prefix.io/suffix": fmt.Sprintf("::d000:0:0:%x", i+1),
			"dynamic-prefix.io/service-address-range": "lb"}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%04d", i), Namespace: "default", Annotations: ann},
		Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(8080)}},
			Selector: map[string]string{"app": fmt.Sprintf("a%d", i)}},
	}
}

var dpGVR = schema.GroupVersionResource{Group: "dynamic-prefix.io", Version: "v1alpha1", Resource: "dynamicprefixes"}

func waitAllPools(ctx context.Context, w *world.World, p netip.Prefix) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := w.API.Dynamic.Resource(world.PoolGVR).List(ctx, metav1.ListOptions{})
		if err == nil {
			done := 0
			for _, u := range list.Items {
				for _, b := range world.Blocks(&u) {
					if strings.HasPrefix(b, strings.TrimSuffix(p.String(), "::/64")) {
						done++
						break
					}
				}
			}
			if done == len(list.Items) && done > 0 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pools never converged (logs in %s)", w.Dir)
}

// homeRange is the block DynamicPrefix "home"'s range gives on a /64.
func homeRange(p netip.Prefix) string {
	base := strings.TrimSuffix(p.String(), "::/64")
	return base + ":d000::-" + base + ":dfff:ffff:ffff:ffff"
}

// firstPoolWith waits for a pool event whose current entry (the first after the
// user's block) is block; the duration is measured from since.
func firstPoolWith(ctx context.Context, wt watch.Interface, block string, since time.Time) (time.Duration, error) {
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-wt.ResultChan():
			if !ok {
				return 0, fmt.Errorf("pool watch closed")
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				if b := world.Blocks(u); len(b) > 1 && b[1] == block {
					return time.Since(since), nil
				}
			}
		case <-timeout:
			return 0, fmt.Errorf("no pool received %s", block)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// cpuTimes returns user+system CPU seconds of each process.
func cpuTimes(procs map[string]*exec.Cmd) map[string]float64 {
	out := map[string]float64{}
	for name, c := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		var ut, st float64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		out[name] = (ut + st) / 100 // USER_HZ
	}
	return out
}

// memory returns current and peak RSS in MiB.
// memUse is a process's memory in MiB from /proc/<pid>/status: RSS, its peak,
// and RSS split into anonymous memory (heap, stacks: what grows with the
// workload) and file pages (for a static Go binary, its own pages that the
// kernel mapped in and around what it ran; shared and reclaimable).
type memUse struct{ rss, peak, anon, file float64 }

func memory(pid int) memUse {
	var m memUse
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	fields := map[string]*float64{"VmRSS:": &m.rss, "VmHWM:": &m.peak, "RssAnon:": &m.anon, "RssFile:": &m.file}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, "\t")
		if dst := fields[name]; ok && dst != nil {
			var kb float64
			fmt.Sscan(v, &kb)
			*dst = kb / 1024
		}
	}
	return m
}

func machine() map[string]string {
	m := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.Join(strings.Fields(strings.Split(string(b), "\n")[0])[1:], " ")
	}
	return m
}

func versions() map[string]string {
	v := map[string]string{"go": runtime.Version(), "kube-apiserver": "v1.35.4", "etcd": "v3.6.16"}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/cilium/cilium").Output(); err == nil {
		v["cilium types"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("radvd", "--version").Output(); err == nil {
		v["radvd"] = strings.TrimSpace(strings.Split(string(out), "\n")[0])
	}
	return v
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p/100*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

func write(r *results, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# renumber benchmark results\n\nMeasured %s by `make bench` (tools/bench).\n\n", r.Date)
	fmt.Fprintf(&b, "Machine: %s CPUs, %s, %s, kernel %s. Versions: ", r.Machine["cpus"], r.Machine["memory"], r.Machine["os"], r.Machine["kernel"])
	var vs []string
	for k, v := range r.Versions {
		vs = append(vs, k+" "+v)
	}
	slices.Sort(vs)
	fmt.Fprintf(&b, "%s.\n\n", strings.Join(vs, ", "))
	fmt.Fprintf(&b, "Workload: 3 nodes (agents in namespaces, SLAAC from radvd, RAs every %s s), %d DynamicPrefixes (HA mode), %d Cilium pools (%d per prefix), %d Services of which %d follow a prefix, 2 writers (lease 60 s / renew 40 s / retry 5 s).\n\n", cmp.Or(r.RAIntervals, "3-4"), dps, dps*poolsPerDP, poolsPerDP, services, haServices)
	if s := r.Steady; s != nil {
		fmt.Fprintf(&b, "## Steady state (%.0f s, measured %s)\n\n| goal | measured |\n|---|---|\n", s.Seconds, s.At)
		fmt.Fprintf(&b, "| 0.000 writes/s besides the Lease | %.3f writes/s |\n", s.OtherPerSec)
		fmt.Fprintf(&b, "| one Lease renewal per retry period (%.0f s): %.3f/s | %d renewals, %.3f/s |\n\n", s.RetryPeriod, 1/s.RetryPeriod, s.LeaseRenews, s.LeasesPerSec)
		b.WriteString(table(s.WritesByWho))
	}
	if r.StartupMS > 0 {
		fmt.Fprintf(&b, "\n## Launch to pools, and the change benchmark's settings\n\nFrom starting the agents and writers in the fresh world to every pool holding the router's prefix: %.0f ms. Agents' --corroboration: %s; radvd's Min/MaxRtrAdvInterval: %s s.\n", r.StartupMS, cmp.Or(r.Corroboration, "their default"), r.RAIntervals)
	}
	if c := r.Change; c != nil {
		writeChange(&b, "radvd answers solicitations unicast, its default", c)
	}
	if c := r.ChangeMulticast; c != nil {
		writeChange(&b, "radvd answers solicitations to all nodes, AdvRASolicitedUnicast off", c)
	}
	if len(r.Procs) > 0 {
		b.WriteString("\n## Memory and CPU at steady state\n\n| process | RSS MiB | of which the binary's pages | of which anonymous | peak RSS MiB | CPU s/hour | goal |\n|---|---|---|---|---|---|---|\n")
		for _, p := range r.Procs {
			goal := "<= 16 MiB"
			if strings.HasPrefix(p.Name, "writer") {
				goal = "<= 32 MiB"
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", p.Name, p.RSSMiB, p.FileMiB, p.AnonMiB, p.PeakMiB, p.CPUSecHour, goal)
		}
		b.WriteString("\nThe binary's pages are file-backed: the kernel maps in the pages around every page a process touches, and package initialisation touches all over a binary, so they follow the binary's size (below) more than the workload. The anonymous part is Go's heap, stacks and runtime; the writer's heap in use is profiled in the scale section.\n")
	}
	if len(r.Sizes) > 0 {
		writeSizes(&b, r.Sizes, r.Layers)
	}
	if len(r.Scale) > 0 {
		writeScale(&b, r.ScaleAt, r.Scale)
	}
	if r.Soak != nil {
		writeSoak(&b, r.Soak)
	}
	if r.Burst != nil {
		writeBurst(&b, r.Burst)
	}
	if r.Flood != nil {
		writeFlood(&b, r.Flood)
	}
	if r.Scrape != nil {
		writeScrape(&b, r.Scrape)
	}
	if r.Idle != nil {
		writeIdle(&b, r.Idle)
	}
	if r.DNS != nil {
		writeDNS(&b, r.DNS)
	}
	if r.Answer != nil {
		writeAnswer(&b, r.Answer)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Not measured / caveats\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644)
}

// writeChange writes one answer mode's change section.
func writeChange(b *strings.Builder, how string, c *change) {
	fmt.Fprintf(b, "\n## Prefix changes, %s (%d, measured %s)\n\n", how, c.Changes, c.At)
	fmt.Fprintf(b, "| | p50 | p90 | p99 |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| router SIGHUP -> pool holds the new block (goal p99 < 2 s) | %.0f ms | %.0f ms | %.0f ms |\n", percentile(c.LatencyMS, 50), percentile(c.LatencyMS, 90), percentile(c.LatencyMS, 99))
	fmt.Fprintf(b, "| SIGHUP -> the node digest that made the majority | %.0f ms | %.0f ms | %.0f ms |\n", percentile(c.RAToDigestMS, 50), percentile(c.RAToDigestMS, 90), percentile(c.RAToDigestMS, 99))
	fmt.Fprintf(b, "| that digest -> first pool patch (writer debounce + pass) | %.0f ms | %.0f ms | %.0f ms |\n\n", percentile(c.DigestToPool, 50), percentile(c.DigestToPool, 90), percentile(c.DigestToPool, 99))
	fmt.Fprintf(b, "Object writes per change (not Lease, not events): %.2f; minimum possible: %d (one annotation per node + one patch per pool + one status per DynamicPrefix + one patch per following Service).\n\nAll writes over the %d changes:\n\n", c.ObjectPer, c.MinimumPer, c.Changes)
	b.WriteString(table(c.WritesByWho))
}

func table(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("| identity, verb, resource | writes |\n|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %d |\n", k, m[k])
	}
	return b.String()
}

// startInstalledWorld is startWorld with the CRDs and renumber's RBAC installed.
func startInstalledWorld(ctx context.Context, nodes int) (*world.World, error) {
	w, err := startWorld(ctx, nodes)
	if err != nil {
		return nil, err
	}
	if err := w.API.InstallCRDs(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.API.InstallRBAC(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// startWorld starts a world whose writers run with the shipped Deployment's
// environment (GOGC, GOMEMLIMIT): the benchmarks measure what ships.
func startWorld(ctx context.Context, nodes int) (*world.World, error) {
	env, err := world.ShippedWriterEnv()
	if err != nil {
		return nil, err
	}
	w, err := world.Start(ctx, world.Options{Nodes: nodes})
	if err != nil {
		return nil, err
	}
	w.WriterEnv = env
	return w, nil
}
