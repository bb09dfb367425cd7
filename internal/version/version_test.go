package version

import (
	"runtime/debug"
	"testing"
)

func TestFromTheToolchainsBuildInfo(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.3", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			"v1.2.3 (revision abc123, go1.26.3)"},
		{debug.BuildInfo{GoVersion: "go1.26.3", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) (revision abc123-dirty, go1.26.3)"},
		{debug.BuildInfo{GoVersion: "go1.26.3"}, "(devel) (revision unknown, go1.26.3)"},
	} {
		if got := from(&c.bi).String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
