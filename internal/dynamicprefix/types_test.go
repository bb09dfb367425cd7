package dynamicprefix

import (
	"maps"
	"testing"
)

func dp(iface string, global *bool) *DynamicPrefix {
	d := &DynamicPrefix{Spec: Spec{Acquisition: Acquisition{RouterAdvertisement: &RouterAdvertisement{Interface: iface}}}}
	if global != nil {
		d.Spec.Acquisition.PrefixFilter = &PrefixFilter{RequireGlobalUnicast: global}
	}
	return d
}

func TestLinks(t *testing.T) {
	no, yes := false, true
	disabled := dp("eth9", nil)
	disabled.Spec.Acquisition.RouterAdvertisement.Enabled = &no
	tests := []struct {
		name     string
		defaults []string
		dps      []*DynamicPrefix
		want     map[string]bool
	}{
		{"flags only", []string{"eth0"}, nil, map[string]bool{"eth0": true}},
		{"named interface added", []string{"eth0"}, []*DynamicPrefix{dp("eth1", nil)}, map[string]bool{"eth0": true, "eth1": true}},
		{"empty interface follows the flags", []string{"eth0"}, []*DynamicPrefix{dp("", &no)}, map[string]bool{"eth0": false}},
		{"one follower allowing non-global is enough", nil, []*DynamicPrefix{dp("eth1", &yes), dp("eth1", &no)}, map[string]bool{"eth1": false}},
		{"RA disabled adds nothing", nil, []*DynamicPrefix{disabled}, map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Links(tt.defaults, tt.dps); !maps.Equal(got, tt.want) {
				t.Errorf("Links = %v, want %v", got, tt.want)
			}
		})
	}
}
