package digest

import (
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	dec := func(s string) Node {
		n, err := Decode(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	got := Diff(
		dec("v1;eth0=2001:db8:a::/64 p ra,2001:db8:c::/64 d ra"),
		dec("v1;eth0=2001:db8:a::/64 d60 ra+addr,2001:db8:b::/64 p ra"),
	)
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{
		"eth0: prefix 2001:db8:a::/64 deprecated (ra+addr)",
		"eth0: prefix 2001:db8:b::/64 appeared (ra)",
		"eth0: prefix 2001:db8:c::/64 gone (ra)",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("Diff:\n got %q\nwant %q", lines, want)
	}
}
