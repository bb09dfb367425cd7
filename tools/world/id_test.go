package world

import (
	"os/exec"
	"testing"
)

func TestAnIDWhoseNetworkIsStillThereIsNotTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("adds a link to the root namespace: not with -short (make unit)")
	}
	if err := Require(); err != nil {
		t.Skipf("test world unavailable: %v", err)
	}
	const id = "zz01" // no world's ID: those are hex
	if networkLeft(id) {
		t.Fatalf("rn%sh is there before the test made it", id)
	}
	if out, err := exec.Command("ip", "link", "add", hostLink(id), "type", "veth", "peer", "name", "rn"+id+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostLink(id)).Run() })
	if !networkLeft(id) {
		t.Fatalf("a world could take ID %s while rn%sh is still there", id, id)
	}
	teardown(state{ID: id})
	if networkLeft(id) {
		t.Errorf("teardown left rn%sh", id)
	}
}
