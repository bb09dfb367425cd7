package caches

import (
	"maps"
	"testing"
)

func TestDifferences(t *testing.T) {
	api := map[string]string{"a": "5", "b": "7", "c": "9"}
	cache := map[string]string{"a": "5", "b": "6", "d": "3"}
	want := map[string]string{"b": "7", "c": "9", "d": deleted}
	if got := differences(api, cache); !maps.Equal(got, want) {
		t.Errorf("differences = %v, want %v", got, want)
	}
}
