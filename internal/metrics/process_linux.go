package metrics

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// The process's metrics from /proc, under the names client_golang's process
// collector uses.
var (
	descCPU      = &Desc{Name: "process_cpu_seconds_total", Help: "Total user and system CPU time spent in seconds.", Type: "counter"}
	descRSS      = &Desc{Name: "process_resident_memory_bytes", Help: "Resident memory size in bytes.", Type: "gauge"}
	descVirt     = &Desc{Name: "process_virtual_memory_bytes", Help: "Virtual memory size in bytes.", Type: "gauge"}
	descStart    = &Desc{Name: "process_start_time_seconds", Help: "Start time of the process since unix epoch in seconds.", Type: "gauge"}
	descOpenFDs  = &Desc{Name: "process_open_fds", Help: "Number of open file descriptors.", Type: "gauge"}
	descMaxFDs   = &Desc{Name: "process_max_fds", Help: "Maximum number of open file descriptors.", Type: "gauge"}
	userHZ       = 100.0 // what every Linux exports to user space (procfs assumes the same)
	pageSize     = float64(os.Getpagesize())
	procSelfStat = "/proc/self/stat"
)

type processCollector struct{}

// Process returns the collector of this process's CPU, memory and descriptors.
// A sample it cannot read is left out, never invented.
func Process() Collector { return processCollector{} }

func (processCollector) Collect(w *Writer) {
	if f, ok := readStat(procSelfStat); ok {
		w.Sample(descCPU, (f.utime+f.stime)/userHZ)
		w.Sample(descRSS, f.rssPages*pageSize)
		w.Sample(descVirt, f.vsize)
		if boot, ok := bootTime(); ok {
			w.Sample(descStart, boot+f.startTicks/userHZ)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		w.Sample(descOpenFDs, float64(len(fds)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		w.Sample(descMaxFDs, float64(lim.Cur))
	}
}

type stat struct{ utime, stime, startTicks, vsize, rssPages float64 }

// readStat reads proc(5)'s stat fields 14, 15, 22, 23 and 24. The command name
// (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
func readStat(path string) (stat, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 22 {
		return stat{}, false
	}
	num := func(field int) float64 {
		v, _ := strconv.ParseFloat(f[field-3], 64)
		return v
	}
	return stat{utime: num(14), stime: num(15), startTicks: num(22), vsize: num(23), rssPages: num(24)}, true
}

// bootTime is read once: the machine's boot time does not change.
var bootTime = sync.OnceValues(func() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return t, err == nil
		}
	}
	return 0, false
})
