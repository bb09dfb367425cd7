// The agent's memory of the routers across a restart (observe/memory.go),
// kept in a small file under Config.StateDir on the node: root's, so
// trusted, but never a reason to crash. A missing, garbled or stale file
// leaves the agent with the digest's seed alone, as before, with one line.
// Written atomically (a temporary file renamed over it), and only when the
// memory moved (observe.Memory.Moved): not on every RA.

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/renumber/renumber/internal/agent/observe"
)

// MemoryFile is the memory's file name under Config.StateDir for an agent
// that names no node; one that does keeps memoryFile(node), so that agents
// sharing a directory (kubelets in one host's namespaces, a hostPath on
// shared storage) never read each other's memory.
const MemoryFile = "routers.json"

// memoryFile is the file the agent on node keeps its memory in. A Node's
// name is a DNS subdomain; anything else gets MemoryFile.
func memoryFile(node string) string {
	if node == "" || strings.ContainsAny(node, `/\`) || strings.HasPrefix(node, ".") {
		return MemoryFile
	}
	return "routers-" + node + ".json"
}

// memoryFormat is the file's format. A release that adds a field an older
// one must not ignore (one that narrows what a word may say) raises it: a
// rollback then refuses the file, as written by a newer release, rather
// than reading the words without it. A file without one (0) was written
// before the format was kept, in this format.
const memoryFormat = 1

// memoryOnDisk is the file's content: the memory and its format.
type memoryOnDisk struct {
	Format int `json:"format,omitempty"`
	observe.Memory
}

// maxMemoryBytes bounds what is read: a link's RA table (256 words of a
// few hundred bytes each) for a few dozen links.
const maxMemoryBytes = 4 << 20

// errStaleMemory: nothing the file says still holds.
var errStaleMemory = errors.New("every word it holds ran out")

// loadMemory reads node's memory under dir at now. A missing file is
// fs.ErrNotExist; a garbled one, too big, written after now (a clock that
// went back: its ends cannot be trusted), or with nothing left, an error.
func loadMemory(dir, node string, now time.Time) (observe.Memory, error) {
	f, err := os.Open(filepath.Join(dir, memoryFile(node)))
	if err != nil {
		return observe.Memory{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMemoryBytes+1))
	if err != nil {
		return observe.Memory{}, fmt.Errorf("read: %w", err)
	}
	if len(b) > maxMemoryBytes {
		return observe.Memory{}, fmt.Errorf("over %d bytes", maxMemoryBytes)
	}
	var disk memoryOnDisk
	if err := json.Unmarshal(b, &disk); err != nil {
		return observe.Memory{}, fmt.Errorf("parse: %w", err)
	}
	if disk.Format > memoryFormat {
		return observe.Memory{}, fmt.Errorf("format %d, from a newer release (this one reads up to %d)", disk.Format, memoryFormat)
	}
	m := disk.Memory
	if m.At.After(now) {
		return observe.Memory{}, fmt.Errorf("written at %s, after now (%s)", m.At.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	for _, l := range m.Links {
		for _, w := range l.Words {
			if w.Valid.IsZero() || w.Valid.After(now) {
				return m, nil
			}
		}
	}
	return observe.Memory{}, errStaleMemory
}

// saveMemory writes node's memory m under dir atomically: a reader (the next start) sees
// the old file or the new one, never half of one.
func saveMemory(dir, node string, m observe.Memory) error {
	b, err := json.Marshal(memoryOnDisk{Format: memoryFormat, Memory: m})
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	tmp, err := os.CreateTemp(dir, memoryFile(node)+".*")
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, memoryFile(node))); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}

// interfaceHardware is the link-layer address of the interface named link
// now, "" when it has none or cannot be read (a link not there yet: the
// memory is then not checked).
func interfaceHardware(link string) string {
	ifi, err := net.InterfaceByName(link)
	if err != nil || len(ifi.HardwareAddr) == 0 {
		return ""
	}
	return ifi.HardwareAddr.String()
}

// openMemory loads the memory at start, saying once why there is none.
func (a *Agent) openMemory() {
	if a.cfg.StateDir == "" {
		return
	}
	m, err := loadMemory(a.cfg.StateDir, a.cfg.Node, a.clock.Now())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		a.log.Info("no memory of the routers: the digest's seed alone", "dir", a.cfg.StateDir)
	case err != nil:
		a.log.Warn("cannot use the memory of the routers: the digest's seed alone", "dir", a.cfg.StateDir, "err", err)
	default:
		a.memory = m
	}
	a.written = a.memory
}

// keepMemory writes the memory when it moved since the last write.
func (a *Agent) keepMemory(now time.Time) {
	if a.cfg.StateDir == "" {
		return
	}
	m := a.state.Memory(now)
	if !m.Moved(a.written, observe.MemoryQuantum) {
		return
	}
	if err := saveMemory(a.cfg.StateDir, a.cfg.Node, m); err != nil {
		metricMemoryWrites.With("failed").Inc()
		if !a.memoryFailing {
			a.log.Warn("cannot keep the memory of the routers", "dir", a.cfg.StateDir, "err", err)
		}
		a.memoryFailing = true
		return
	}
	metricMemoryWrites.With("ok").Inc()
	a.memoryFailing = false
	a.written = m
}
