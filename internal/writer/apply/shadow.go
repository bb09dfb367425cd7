package apply

import (
	"encoding/json"
	"strings"

	"github.com/renumber/renumber/internal/writer/api"
	"github.com/renumber/renumber/internal/writer/holdings"
	"github.com/renumber/renumber/internal/writer/permit"
)

// annotationChanges are the changes a merge patch of annotations (nil
// removes a key) makes to live.
func annotationChanges(o permit.Object, live map[string]string, patch map[string]any) []permit.Change {
	return permit.Fields(o.String(), "metadata.annotations.", live, holdings.Applied(live, patch))
}

// statusChanges are the top-level status fields that differ, as JSON.
func statusChanges(o permit.Object, live, want api.Status) []permit.Change {
	return permit.Fields(o.String(), "status.", fieldsJSON(live), fieldsJSON(want))
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

func joined(v []string) string { return strings.Join(v, ",") }
