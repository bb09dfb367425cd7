package backends

import (
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/version"
)

// FixedL2Announcer is the first Cilium whose L2 announcer announces an address
// added to an existing Service (cilium/cilium PR 47579).
var FixedL2Announcer = version.MustParseSemantic("v1.20.1")

// DaemonSetSelector selects the Cilium agent DaemonSet whose images say which
// Cilium runs.
const DaemonSetSelector = "k8s-app=cilium"

// NeedsL2Nudge reads the images of the Cilium DaemonSet's containers: no nudge
// only when every Cilium image is tagged with a version at or after
// FixedL2Announcer. Anything uncertain (no DaemonSet, no Cilium image, a tag
// that is not a version, a digest alone) needs the nudge. why says which, for
// the log.
func NeedsL2Nudge(images []string) (need bool, why string) {
	var seen []string
	for _, img := range images {
		repo, tag := splitImage(img)
		if !strings.HasPrefix(path.Base(repo), "cilium") {
			continue
		}
		v, err := version.ParseSemantic(tag)
		if err != nil {
			return true, fmt.Sprintf("Cilium image %s has no version tag", img)
		}
		if v.LessThan(FixedL2Announcer) {
			return true, fmt.Sprintf("Cilium %s is older than %s", v, FixedL2Announcer)
		}
		seen = append(seen, v.String())
	}
	if len(seen) == 0 {
		return true, fmt.Sprintf("no Cilium image in a DaemonSet labelled %s", DaemonSetSelector)
	}
	return false, "Cilium " + strings.Join(seen, ", ")
}

// splitImage returns an image reference's repository and tag ("" if none): a
// digest is dropped, and a colon counts only after the last slash (a
// registry's port is not a tag).
func splitImage(img string) (repo, tag string) {
	img, _, _ = strings.Cut(img, "@")
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		return img[:i], img[i+1:]
	}
	return img, ""
}

// L2Nudge decides whether HA Services get the L2 announcer nudge
// (render.ServiceOptions.L2Nudge) and logs each change of mind once.
type L2Nudge struct {
	// Mode is "auto" (from Images), "always" or "never".
	Mode string
	// Images are the Cilium DaemonSet's container images now (auto); known
	// is false while they cannot be read.
	Images func() (images []string, known bool)
	Log    *slog.Logger

	mu   sync.Mutex
	last string
}

// L2NudgeModes are the values of Mode.
var L2NudgeModes = []string{"auto", "always", "never"}

// Needed reports whether Services need the nudge now.
func (n *L2Nudge) Needed() bool {
	switch n.Mode {
	case "always":
		return true
	case "never":
		return false
	}
	images, known := n.Images()
	need, why := NeedsL2Nudge(images)
	if !known {
		need, why = true, "the Cilium DaemonSet cannot be read (yet)"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if why != n.last {
		n.last = why
		if need {
			n.Log.Info("HA Services get an L2 announcer nudge when their load balancer publishes a new address", "why", why)
		} else {
			n.Log.Info("HA Services need no L2 announcer nudge", "why", why)
		}
	}
	return need
}
