package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestFiveQuietMinutes (scenario 2, make e2e): three nodes, two writers with
// production timings, RAs every 3-4 s and nothing changing for five minutes:
// no write from any identity of ours but the leader's Lease renewals (one per
// 5 s retry period), and no log line above debug from any of our processes.
func TestFiveQuietMinutes(t *testing.T) {
	long(t)
	w := homeWorld(t, 3)
	ctx := t.Context()
	for _, n := range []string{"node1", "node2", "node3"} {
		startAgent(t, w, n)
	}
	for _, n := range []string{"writer-a", "writer-b"} {
		startWriter(t, w, n, productionTimings...)
	}
	poolIs(t, w, "pool follows A", prefixA.String())
	// Started together, both writers may try to create the Lease at once: the
	// loser learns who leads at its next attempt, up to a jittered retry period
	// (11 s) later, and says so in one line. The quiet period starts after it.
	for _, n := range []string{"writer-a", "writer-b"} {
		eventually(t, n+" knows who leads", func() (bool, string) {
			return lastLine(w, n+".log", []string{" leading ", " following "}) != "", ""
		})
	}
	settleWrites()

	logs, _ := filepath.Glob(filepath.Join(w.Dir, "*.log"))
	var ours []string
	offsets := map[string]int64{}
	for _, f := range logs {
		if base := filepath.Base(f); regexp.MustCompile(`^(agent-node\d+|writer-[ab])\.log$`).MatchString(base) {
			ours = append(ours, f)
			if st, err := os.Stat(f); err == nil {
				offsets[f] = st.Size()
			}
		}
	}
	if len(ours) != 5 {
		t.Fatalf("logs of our processes: %v", ours)
	}
	m := mark(t, w)
	time.Sleep(5 * time.Minute)
	ws, err := w.API.WritesSince(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	renewals := 0
	for _, wr := range ws {
		if wr.User == writerUser && wr.Resource == "leases" && wr.Verb == "update" {
			renewals++
			continue
		}
		if wr.User == writerUser || wr.User == agentUser {
			t.Errorf("write in a quiet period: %s", wr)
		}
	}
	// 300 s / 5 s = 60, give or take the window's edges.
	if renewals < 58 || renewals > 61 {
		t.Errorf("%d Lease renewals in 5 minutes with a 5 s retry period, want 60", renewals)
	}
	for _, f := range ours {
		for _, line := range linesFrom(t, f, offsets[f]) {
			if !debugLine.MatchString(line) {
				t.Errorf("%s: a line above debug in a quiet period: %s", filepath.Base(f), line)
			}
		}
	}
}

// debugLine matches tint's debug levels (DBG, DBG+1, ...) after the time.
var debugLine = regexp.MustCompile(`^\S+ DBG(\+\d+)? `)

func linesFrom(t *testing.T, file string, offset int64) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}
