package apply

import (
	"encoding/json"
	"strings"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/plan"
	"github.com/renumber/renumber/internal/writer/service"
)

// shadow reports whether w only plans (writer --dry-run); then the changes of
// the write it was about to make are recorded in the plan instead, and the
// caller returns as if the write was made, without touching memo or budget.
func (w *Writer) shadow(cs ...plan.Change) bool {
	if w.Plan == nil {
		return false
	}
	w.Plan.Add(cs...)
	return true
}

// annotationChanges are the changes a merge patch of annotations (nil
// removes a key) makes to live.
func annotationChanges(o object, live map[string]string, patch map[string]any) []plan.Change {
	return plan.Fields(o.String(), "metadata.annotations.", live, service.Applied(live, patch))
}

// statusChanges are the top-level status fields that differ, as JSON.
func statusChanges(o object, live, want dynamicprefix.Status) []plan.Change {
	return plan.Fields(o.String(), "status.", fieldsJSON(live), fieldsJSON(want))
}

// fieldsJSON is each top-level field of v as JSON (absent when empty).
func fieldsJSON(v any) map[string]string {
	var m map[string]json.RawMessage
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	out := map[string]string{}
	for k, raw := range m {
		if s := string(raw); s != `""` && s != "null" && s != "[]" && s != "{}" {
			out[k] = s
		}
	}
	return out
}

// create, update and remove describe a whole object's write in a plan.
func create(o object, v any) plan.Change {
	return plan.Change{Object: o.String(), Field: "(object)", To: compact(v)}
}

func update(o object, from, to any) plan.Change {
	return plan.Change{Object: o.String(), Field: "spec", From: compact(from), To: compact(to)}
}

func remove(o object) plan.Change {
	return plan.Change{Object: o.String(), Field: "(object)", From: "exists"}
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func joined(v []string) string { return strings.Join(v, ",") }
