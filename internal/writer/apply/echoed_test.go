package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/renumber/renumber/internal/writer/render"
)

// A Gateway's status echoes its spec.addresses, which its owner chooses:
// an address counts as published for it (as a Service's ingress) only where
// a load balancer publishes it for the Service its controller generated for
// it too (red team r9b); the rest is an echo (HeldByEcho).
func TestAGatewaysEchoIsPublishedOnlyWhereItsGeneratedServiceIs(t *testing.T) {
	const cur, next, webs = "2001:db8:1::2", "2001:db8:2::2", "2001:db8:1::1"
	for _, tc := range []struct {
		name              string
		echoed, generated []string
		want              render.Seen
	}{
		{"no generated Service: an echo", []string{cur, next}, nil, render.Seen{Echoed: []string{cur, next}}},
		{"its generated Service publishes what it echoes", []string{cur, next}, []string{next, cur}, render.Seen{Published: []string{cur, next}}},
		{"a tenant's spec naming web's address: its generated Service is granted only its own",
			[]string{cur, webs}, []string{cur}, render.Seen{Published: []string{cur}, Echoed: []string{webs}}},
		{"published for the generated Service, not echoed: not the Gateway's", []string{cur}, []string{cur, webs}, render.Seen{Published: []string{cur}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, echoedSeen(tc.echoed, tc.generated)); diff != "" {
				t.Errorf("echoedSeen(%q, %q) (-want +got):\n%s", tc.echoed, tc.generated, diff)
			}
		})
	}
}
