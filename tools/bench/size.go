package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/renumber/renumber/tools/world"
)

// sizes returns each binary's size and the size of the image layer that
// carries it: a tar of the one file, gzip-compressed at the default level, as
// `docker build` makes and a registry stores it. The distroless base's layers
// come on top (not downloadable here).
func sizes() (bins, layers map[string]int64) {
	bins, layers = map[string]int64{}, map[string]int64{}
	for _, name := range []string{"agent", "writer"} {
		p, err := world.Bin(name)
		if err != nil {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			bins[name] = st.Size()
		}
		if n, err := layerSize(p, name); err == nil {
			layers[name] = n
		}
	}
	return bins, layers
}

// layerSize is the size of a gzipped tar holding the file at path as name.
func layerSize(path, name string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var c counter
	gz := gzip.NewWriter(&c)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
		return 0, err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return 0, err
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := gz.Close(); err != nil {
		return 0, err
	}
	return int64(c), nil
}

type counter int64

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }

func writeSizes(b *strings.Builder, bins, layers map[string]int64) {
	b.WriteString("\n## Binary and image layer sizes\n\n| binary | stripped MiB | its image layer, tar.gz MiB |\n|---|---|---|\n")
	for _, n := range []string{"agent", "writer"} {
		layer := "-"
		if l, ok := layers[n]; ok {
			layer = fmt.Sprintf("%.1f", float64(l)/(1<<20))
		}
		fmt.Fprintf(b, "| %s | %.1f | %s |\n", n, float64(bins[n])/(1<<20), layer)
	}
	b.WriteString("\nAn image is this layer on gcr.io/distroless/static-debian12:nonroot, whose own layers are not downloadable here (no registry access): not measured.\n")
}
