package permit

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMemoStandsInOnlyWhileTheCacheShowsTheBase(t *testing.T) {
	var m Memo[string]
	lb := Object{Resource: "pool", Name: "lb"}
	m.Put(lb, "7", "written")
	if v, ok := m.Get(lb, "7"); !ok || v != "written" {
		t.Errorf("same base: %q %v", v, ok)
	}
	if _, ok := m.Get(lb, "8"); ok {
		t.Error("the cache moved on, yet the memo answered")
	}
	if _, ok := m.Get(lb, "7"); ok {
		t.Error("an entry outlived the cache moving on")
	}
}

type count struct{ reasons []string }

func (c *count) Event(_ *unstructured.Unstructured, _ bool, reason, _ string) bool {
	c.reasons = append(c.reasons, reason)
	return true
}

func TestEventsMarkTransitions(t *testing.T) {
	c := &count{}
	e := Events{Recorder: c}
	u := &unstructured.Unstructured{}
	for range 3 {
		e.Announce("dp/home", u, true, "InvalidSpec", "range lb is reversed")
	}
	e.Announce("dp/home", u, true, "InvalidSpec", "subnet s does not fit")
	e.Forget("dp/home")
	e.Announce("dp/home", u, true, "InvalidSpec", "subnet s does not fit")
	e.Event(u, "PoolUpdated", "")
	want := []string{"InvalidSpec", "InvalidSpec", "InvalidSpec", "PoolUpdated"}
	if len(c.reasons) != len(want) {
		t.Errorf("events %q, want %q", c.reasons, want)
	}
}

func TestBreakerEpisode(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	b := NewBreaker(Limits{ObjectBurst: 1, ObjectPerMinute: 6, TotalBurst: 100, TotalPerMinute: 100})
	if p := b.Take("pool/lb", "home", now); !p.OK || p.Again != 0 {
		t.Fatalf("first write: %+v", p)
	}
	p := b.Take("pool/lb", "home", now)
	if p.OK || !p.Started || p.Again <= 0 || b.Throttled() != 1 {
		t.Fatalf("second write at once: %+v, %d throttled; want refused, an episode started", p, b.Throttled())
	}
	if p := b.Take("pool/lb", "home", now); p.OK || p.Started {
		t.Errorf("third: %+v; want refused within the same episode", p)
	}
	// Ten seconds on a token is back: permitted, but the episode lasts until the bucket is full.
	now = now.Add(10 * time.Second)
	if p := b.Take("pool/lb", "home", now); !p.OK || p.Again <= 0 {
		t.Errorf("after 10 s: %+v; want permitted with a look again", p)
	}
	if ended, again := b.Calm("pool/lb", now); ended || again <= 0 {
		t.Errorf("calm right after a write: ended %v, again %v", ended, again)
	}
	if ended, _ := b.Calm("pool/lb", now.Add(time.Minute)); !ended || b.Throttled() != 0 {
		t.Errorf("a minute later: ended %v, %d throttled; want the episode over", ended, b.Throttled())
	}
	if ended, again := b.Calm("svc/web", now); ended || again != 0 {
		t.Errorf("calm without an episode: %v %v", ended, again)
	}
}

// A cache has seen the writer's own last write once it shows a version other
// than the one the write was computed from and, where versions read as
// numbers (the API server's do), not older than the one the write made.
func TestMemoKnowsACacheBehindItsOwnWrite(t *testing.T) {
	lb := Object{Resource: "dynamicprefixes", Name: "home"}
	for _, c := range []struct {
		name       string
		base, made string
		cached     string
		remembered bool
		behind     bool
	}{
		{name: "nothing written", cached: "7"},
		{name: "still the base", remembered: true, base: "7", made: "9", cached: "7", behind: true},
		{name: "older than the base", remembered: true, base: "7", made: "9", cached: "5", behind: true},
		{name: "the version made", remembered: true, base: "7", made: "9", cached: "9"},
		{name: "newer still", remembered: true, base: "7", made: "9", cached: "12"},
		{name: "made unknown, moved on", remembered: true, base: "7", cached: "8"},
		{name: "versions not numbers", remembered: true, base: "a", made: "c", cached: "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m Memo[string]
			if c.remembered {
				m.PutMade(lb, c.base, c.made, "written")
			}
			if got := m.Behind(lb, c.cached); got != c.behind {
				t.Errorf("Behind(%q) after a write from %q that made %q = %v, want %v", c.cached, c.base, c.made, got, c.behind)
			}
		})
	}
}
