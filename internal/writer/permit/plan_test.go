package permit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestAPassReplacesWhatItsPreviousPassPlanned(t *testing.T) {
	var log bytes.Buffer
	p := NewPlan(slog.New(slog.NewTextHandler(&log, nil)))
	a := Change{Object: "services/default/web", Field: "metadata.annotations.x", From: "1", To: "2"}
	b := Change{Object: "ciliumloadbalancerippools/lb", Field: "spec entries", From: "A", To: "B"}

	p.Begin("dynamicprefixes/home")
	p.Add(a, b)
	p.Commit()
	p.Begin("release services/default/old")
	p.Add(Change{Object: "services/default/old", Field: "metadata.annotations.x", From: "1"})
	p.Commit()
	if got := len(p.Changes()); got != 3 {
		t.Fatalf("%d changes, want 3", got)
	}
	if got := strings.Count(log.String(), "would write"); got != 3 {
		t.Errorf("%d log lines, want one per new change:\n%s", got, log.String())
	}

	// The same plan again is not logged again; a pass with nothing to write
	// empties what it planned, and only that.
	log.Reset()
	p.Begin("dynamicprefixes/home")
	p.Add(a)
	p.Commit()
	p.Begin("release services/default/old")
	p.Commit()
	if got := p.Changes(); !slices.Equal(got, []Change{a}) {
		t.Errorf("plan %v, want only %v", got, a)
	}
	if log.Len() != 0 {
		t.Errorf("logged again: %s", log.String())
	}

	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/plan", nil))
	var doc Document
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || !slices.Equal(doc.Changes, []Change{a}) {
		t.Errorf("/debug/plan = %s (%v)", rec.Body.String(), err)
	}
}

func TestFieldsNamesEveryDifferingKey(t *testing.T) {
	got := Fields("o", "f.", map[string]string{"same": "1", "gone": "2", "changed": "3"},
		map[string]string{"same": "1", "changed": "4", "new": "5"})
	want := []Change{
		{Object: "o", Field: "f.changed", From: "3", To: "4"},
		{Object: "o", Field: "f.gone", From: "2"},
		{Object: "o", Field: "f.new", To: "5"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Fields = %v, want %v", got, want)
	}
}
