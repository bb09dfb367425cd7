package backends

import (
	"io"
	"log/slog"
	"testing"
)

// Only a Cilium known to announce added addresses goes without the nudge:
// every uncertain case nudges.
func TestNeedsL2Nudge(t *testing.T) {
	for _, c := range []struct {
		images []string
		want   bool
	}{
		{[]string{"quay.io/cilium/cilium:v1.19.4@sha256:0123"}, true},
		{[]string{"quay.io/cilium/cilium:v1.20.0"}, true},
		{[]string{"quay.io/cilium/cilium:v1.20.1-rc.1"}, true},
		{[]string{"quay.io/cilium/cilium:v1.20.1"}, false},
		{[]string{"registry.example:5000/mirror/cilium:1.21.0"}, false},
		{[]string{"quay.io/cilium/cilium-ci:v1.21.0", "docker.io/library/busybox:1.36"}, false},
		{[]string{"quay.io/cilium/cilium:v1.21.0", "quay.io/cilium/cilium:v1.19.4"}, true}, // mid-upgrade
		{[]string{"quay.io/cilium/cilium:latest"}, true},
		{[]string{"quay.io/cilium/cilium@sha256:0123"}, true},
		{[]string{"registry.example:5000/cilium"}, true},
		{[]string{"docker.io/library/busybox:1.36"}, true},
		{nil, true},
	} {
		if got, why := NeedsL2Nudge(c.images); got != c.want || why == "" {
			t.Errorf("%q: nudge %v (%s), want %v", c.images, got, why, c.want)
		}
	}
}

// While the DaemonSet cannot be read, the version is unknown: nudge.
func TestL2NudgeWhileTheDaemonSetCannotBeRead(t *testing.T) {
	fixed := []string{"quay.io/cilium/cilium:v1.20.1"}
	known := false
	n := &L2Nudge{Mode: "auto", Images: func() ([]string, bool) { return fixed, known }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if !n.Needed() {
		t.Error("no nudge while the DaemonSet cannot be read")
	}
	known = true
	if n.Needed() {
		t.Error("a nudge on Cilium v1.20.1")
	}
}
