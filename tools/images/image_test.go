package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func spec(t *testing.T, name string, caps bool) Spec {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		f := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(f, []byte("\x7fELF "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = f
	}
	return Spec{Name: name, Binaries: bins, Caps: caps, Version: "v0.0.0-test"}
}

// The same inputs give the same bytes, hence the same digests.
func TestImagesAreReproducible(t *testing.T) {
	s := spec(t, "agent", true)
	var a, b bytes.Buffer
	da, err := Write(&a, s)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Write(&b, s)
	if err != nil {
		t.Fatal(err)
	}
	if da != db || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("two builds differ: %s and %s", da, db)
	}
	s.Version = "v0.0.1-test"
	if dc, _ := Write(io.Discard, s); dc == da {
		t.Error("a different version gave the same digest")
	}
}

// dockerfile reads what a Dockerfile's final stage says about the image.
type dockerfile struct {
	user, entrypoint, copyTo string
	setcap                   bool
}

func readDockerfile(t *testing.T, name string) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "USER "):
			d.user = strings.TrimPrefix(line, "USER ")
		case strings.HasPrefix(line, "ENTRYPOINT "):
			var ep []string
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ENTRYPOINT ")), &ep); err != nil || len(ep) != 1 {
				t.Fatalf("%s: ENTRYPOINT %q", name, line)
			}
			d.entrypoint = ep[0]
		case strings.HasPrefix(line, "COPY --from=build "):
			fields := strings.Fields(line)
			d.copyTo = fields[len(fields)-1]
		case strings.Contains(line, "setcap cap_net_bind_service,cap_net_raw=ep"):
			d.setcap = true
		}
	}
	return d
}

// What `make images` builds and what the Dockerfiles describe are the same
// image: user, entrypoint, the binary's path, its file capability, and the
// non-root user known to /etc/passwd (distroless's nonroot).
func TestImagesMatchTheDockerfiles(t *testing.T) {
	for _, c := range []struct {
		name, dockerfile string
		caps             bool
	}{{"agent", "Dockerfile.agent", true}, {"writer", "Dockerfile.writer", false}} {
		t.Run(c.name, func(t *testing.T) {
			d := readDockerfile(t, c.dockerfile)
			img, err := Image(spec(t, c.name, c.caps), "linux/amd64", []byte("bin"))
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != d.user || !slices.Equal(cf.Config.Entrypoint, []string{d.entrypoint}) || d.copyTo != d.entrypoint {
				t.Errorf("image user %q entrypoint %q; Dockerfile user %q entrypoint %q copy to %q",
					cf.Config.User, cf.Config.Entrypoint, d.user, d.entrypoint, d.copyTo)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.Labels["org.opencontainers.image.source"] == "" {
				t.Errorf("config %+v", cf)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers %v %v", layers, err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			files := map[string]*tar.Header{}
			var passwd []byte
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				files["/"+strings.TrimSuffix(h.Name, "/")] = h
				if h.Name == "etc/passwd" {
					passwd, _ = io.ReadAll(tr)
				}
			}
			bin := files[d.entrypoint]
			if bin == nil || bin.Mode&0o111 == 0 {
				t.Fatalf("%s missing or not executable: %v", d.entrypoint, files)
			}
			capability, has := bin.PAXRecords["SCHILY.xattr.security.capability"]
			if has != d.setcap || (has && capability != string(agentCaps())) {
				t.Errorf("file capability %x (set: %v); the Dockerfile sets cap_net_bind_service,cap_net_raw=ep: %v", capability, has, d.setcap)
			}
			if !bytes.Contains(passwd, []byte(":"+strings.ReplaceAll(d.user, ":", ":")+":")) {
				t.Errorf("/etc/passwd has no user %s: %q", d.user, passwd)
			}
		})
	}
}

// cap_net_bind_service,cap_net_raw=ep as setcap writes it in the xattr
// (VFS_CAP_REVISION_2; read back with getfattr -e hex -n security.capability).
func TestAgentCapsEncoding(t *testing.T) {
	want := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x24, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := agentCaps(); !bytes.Equal(got, want) {
		t.Errorf("agentCaps = % x, want % x", got, want)
	}
}
