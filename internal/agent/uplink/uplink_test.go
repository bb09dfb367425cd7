package uplink

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/renumber/renumber/internal/writer/dynamicprefix"
	"github.com/renumber/renumber/internal/writer/spec"
)

func TestLinks(t *testing.T) {
	tests := []struct {
		name      string
		defaults  []string
		followers []Follower
		want      map[string]bool
	}{
		{"flags only", []string{"eth0"}, nil, map[string]bool{"eth0": true}},
		{"named interface added", []string{"eth0"}, []Follower{{"eth1", true}}, map[string]bool{"eth0": true, "eth1": true}},
		{"empty interface follows the flags", []string{"eth0"}, []Follower{{"", false}}, map[string]bool{"eth0": false}},
		{"one follower allowing non-global is enough", nil, []Follower{{"eth1", true}, {"eth1", false}}, map[string]bool{"eth1": false}},
		{"no followers, no flags", nil, nil, map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Links(tt.defaults, tt.followers); !maps.Equal(got, tt.want) {
				t.Errorf("Links = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecodeAgreesWithTheAPITypes: the agent's view reads what the writer's
// spec model makes of the same object, for every combination of the fields
// involved.
func TestDecodeAgreesWithTheAPITypes(t *testing.T) {
	yes, no := true, false
	bools := []*bool{nil, &yes, &no}
	for _, ra := range []*dynamicprefix.RouterAdvertisement{nil, {}, {Interface: "eth1"}, {Interface: "eth1", Enabled: &no}, {Enabled: &yes}} {
		for _, global := range bools {
			var dp dynamicprefix.DynamicPrefix
			dp.Name = "home"
			dp.Spec.Acquisition.RouterAdvertisement = ra
			if global != nil {
				dp.Spec.Acquisition.PrefixFilter = &dynamicprefix.PrefixFilter{RequireGlobalUnicast: global}
			}
			raw, err := json.Marshal(dp)
			if err != nil {
				t.Fatal(err)
			}
			f, follows, err := Decode(raw)
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			m := spec.Parse(dp.Name, dp.Spec)
			if follows != m.RA {
				t.Errorf("%s: follows = %v, the writer's model says %v", raw, follows, m.RA)
				continue
			}
			if !follows {
				continue
			}
			if f.Interface != m.Interface || f.GlobalOnly != m.GlobalOnly {
				t.Errorf("%s: %+v, the writer's model says interface %q, global only %v", raw, f, m.Interface, m.GlobalOnly)
			}
		}
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, raw := range []string{``, `[]`, `{"spec":{"acquisition":{"routerAdvertisement":{"interface":7}}}}`, `{"spec":{"acquisition":{"prefixFilter":{"requireGlobalUnicast":"no"}}}}`} {
		if _, _, err := Decode([]byte(raw)); err == nil {
			t.Errorf("Decode(%s) accepted", raw)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"spec":{"acquisition":{"routerAdvertisement":{"interface":"eth0","enabled":true},"prefixFilter":{"requireGlobalUnicast":false}}}}`))
	f.Add([]byte(`{"spec":{"acquisition":{}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		fl, follows, err := Decode(raw)
		if err != nil && (follows || fl != Follower{}) {
			t.Fatalf("error %v with a result %+v %v", err, fl, follows)
		}
	})
}
