package metrics

import "runtime"

// The Go runtime's metrics, under the names client_golang's Go collector uses,
// so that existing dashboards keep working.
var (
	descGoroutines = &Desc{Name: "go_goroutines", Help: "Number of goroutines that currently exist.", Type: "gauge"}
	descThreads    = &Desc{Name: "go_threads", Help: "Number of OS threads created.", Type: "gauge"}
	descInfo       = &Desc{Name: "go_info", Help: "Information about the Go environment.", Type: "gauge", Labels: []string{"version"}}
	descAlloc      = &Desc{Name: "go_memstats_alloc_bytes", Help: "Number of bytes allocated in heap and currently in use.", Type: "gauge"}
	descHeapInuse  = &Desc{Name: "go_memstats_heap_inuse_bytes", Help: "Number of heap bytes in spans in use.", Type: "gauge"}
	descHeapObj    = &Desc{Name: "go_memstats_heap_objects", Help: "Number of currently allocated objects.", Type: "gauge"}
	descStack      = &Desc{Name: "go_memstats_stack_inuse_bytes", Help: "Number of bytes obtained from the system for stack allocator in use.", Type: "gauge"}
	descSys        = &Desc{Name: "go_memstats_sys_bytes", Help: "Number of bytes obtained from the system.", Type: "gauge"}
	descNextGC     = &Desc{Name: "go_memstats_next_gc_bytes", Help: "Heap size at which the next garbage collection takes place.", Type: "gauge"}
	descGCs        = &Desc{Name: "go_memstats_gc_cycles_total", Help: "Completed garbage collection cycles.", Type: "counter"}
)

type goCollector struct{}

// Go returns the collector of the Go runtime's metrics.
func Go() Collector { return goCollector{} }

func (goCollector) Collect(w *Writer) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Sample(descGoroutines, float64(runtime.NumGoroutine()))
	w.Sample(descThreads, float64(threads()))
	w.Sample(descInfo, 1, runtime.Version())
	w.Sample(descAlloc, float64(m.HeapAlloc))
	w.Sample(descHeapInuse, float64(m.HeapInuse))
	w.Sample(descHeapObj, float64(m.HeapObjects))
	w.Sample(descStack, float64(m.StackInuse))
	w.Sample(descSys, float64(m.Sys))
	w.Sample(descNextGC, float64(m.NextGC))
	w.Sample(descGCs, float64(m.NumGC))
}

func threads() int {
	n, _ := runtime.ThreadCreateProfile(nil)
	return n
}
