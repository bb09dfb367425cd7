//go:build !linux

package metrics

type processCollector struct{}

// Process returns an empty collector: process metrics are read from Linux's /proc.
func Process() Collector { return processCollector{} }

func (processCollector) Collect(*Writer) {}
