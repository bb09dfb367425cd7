package metrics

import "github.com/renumber/renumber/internal/version"

// buildInfo is renumber_build_info: always 1, labelled with the build that
// runs (package version), so a dashboard can tell which version each
// process runs.
func buildInfo() Collector {
	v := version.Get()
	g := NewGaugeVec("renumber_build_info", "Always 1: the version, VCS revision and Go version of the running binary.", "version", "revision", "goversion")
	g.With(v.Version, v.Revision, v.GoVersion).Set(1)
	return g
}
