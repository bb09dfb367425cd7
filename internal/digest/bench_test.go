package digest

import "testing"

// BenchmarkDecode is the writer's cost of reading one node's annotation.
func BenchmarkDecode(b *testing.B) {
	s := "v1;eth0=2001:db8:1::/64 d1800 ra+addr,2001:db8:2::/64 p ra+addr"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}
