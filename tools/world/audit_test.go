package world

import (
	"strings"
	"testing"
)

func TestADryRunIsNoWrite(t *testing.T) {
	log := `{"stage":"ResponseComplete","verb":"patch","requestURI":"/apis/cilium.io/v2/ciliumloadbalancerippools/lb?dryRun=All\u0026fieldManager=renumber-writer","user":{"username":"w"},"objectRef":{"resource":"ciliumloadbalancerippools","name":"lb","apiGroup":"cilium.io"},"responseStatus":{"code":200}}
{"stage":"ResponseComplete","verb":"patch","requestURI":"/apis/cilium.io/v2/ciliumloadbalancerippools/lb?fieldManager=renumber-writer","user":{"username":"w"},"objectRef":{"resource":"ciliumloadbalancerippools","name":"lb","apiGroup":"cilium.io"},"responseStatus":{"code":200}}
`
	ws, err := ParseAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Resource != "ciliumloadbalancerippools" || ws[0].Code != 200 {
		t.Errorf("writes %v, want the one patch that was not a dry run", ws)
	}
}
