package api

import "encoding/json"

// StatusPatch is st as a merge patch over live: a field live has and st
// leaves out (empty) is cleared with null, which a merge patch needs.
func StatusPatch(live, st Status) (map[string]any, error) {
	var from, to map[string]any
	for v, into := range map[*Status]*map[string]any{&live: &from, &st: &to} {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return nil, err
		}
	}
	clearOmitted(from, to)
	return to, nil
}

// clearOmitted sets to null, in to, every key from has and to leaves out, at
// every depth: a merge patch merges objects key by key (RFC 7386), so a key
// of a nested object (status.dhcpv6pd's since, once the two nodes agree)
// left out of the patch would stay as it was. Arrays are replaced whole by
// a merge patch and need nothing.
func clearOmitted(from, to map[string]any) {
	for k, was := range from {
		now, ok := to[k]
		if !ok {
			to[k] = nil
			continue
		}
		wasObj, ok1 := was.(map[string]any)
		nowObj, ok2 := now.(map[string]any)
		if ok1 && ok2 {
			clearOmitted(wasObj, nowObj)
		}
	}
}
