// Package version tells which build of renumber runs, from what the Go
// toolchain embeds in every binary (the module version, the VCS revision and
// whether the tree was modified, the Go version): nothing to stamp at build
// time, so `go build`, `go install` and the Dockerfiles all report it.
package version

import (
	"fmt"
	"runtime/debug"
)

// Info is one binary's build.
type Info struct {
	Version   string // the module version, "(devel)" for a build from a checkout
	Revision  string // the VCS revision, with "-dirty" for a modified tree; "unknown" without VCS
	GoVersion string
}

// Get returns this binary's build.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Revision: "unknown", GoVersion: "unknown"}
	}
	return from(bi)
}

func from(bi *debug.BuildInfo) Info {
	i := Info{Version: bi.Main.Version, Revision: "unknown", GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && i.Revision != "unknown" {
		i.Revision += "-dirty"
	}
	return i
}

// String is what --version prints after the command's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
