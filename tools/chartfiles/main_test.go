package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Every file of charts/renumber/files is a regular file equal to its source
// in manifests/, and there is no other.
func TestTheChartFilesAreTheManifests(t *testing.T) {
	root := filepath.Join("..", "..")
	dir := filepath.Join(root, "charts", "renumber", "files")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(sources) {
		t.Errorf("%d files in %s, %d sources", len(entries), dir, len(sources))
	}
	for _, e := range entries {
		src, ok := sources[e.Name()]
		if !ok {
			t.Errorf("%s: no source in manifests/", e.Name())
			continue
		}
		if !e.Type().IsRegular() {
			t.Errorf("%s is not a regular file (a symbolic link?): run make chart-files", e.Name())
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(root, "manifests", src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from manifests/%s: run make chart-files", e.Name(), src)
		}
	}
}
