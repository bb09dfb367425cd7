package dhcp6

import (
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Anything on the link can send to the client's port: no datagram may crash
// the agent, and a reply's lease always satisfies T1 <= T2 and a valid
// prefix.
func FuzzOffer(f *testing.F) {
	id, err := IdentityFor(testUID, "home")
	if err != nil {
		f.Fatal(err)
	}
	reply := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply}
	reply.AddOption(dhcpv6.OptClientID(id.DUID))
	reply.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}))
	ia := &dhcpv6.OptIAPD{IaId: id.IAID, T1: time.Minute, T2: 2 * time.Minute}
	ia.Options.Add(&dhcpv6.OptIAPrefix{PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour,
		Prefix: &net.IPNet{IP: net.ParseIP("2001:db8:a00::"), Mask: net.CIDRMask(56, 128)}})
	reply.AddOption(ia)
	f.Add(reply.ToBytes())
	f.Add([]byte{7, 0, 0, 0})
	f.Add([]byte{})
	c := &Client{ID: id}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv6.MessageFromBytes(b)
		if err != nil {
			return
		}
		l, err := c.offer(m, time.Unix(0, 0))
		if err != nil {
			return
		}
		if !l.Prefix.IsValid() || l.T1 > l.T2 || l.T1 <= 0 {
			t.Errorf("lease %+v", l)
		}
	})
}
