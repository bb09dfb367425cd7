//go:build kind

package kind

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renumber/renumber/tools/world"
)

const standInLabel = "io.renumber.stand-in"

// TestStandInBaseImages keeps the locally built base images honest where the
// engine could not pull the real ones (e2e/kind/images.sh): every image the
// Dockerfiles name is in the engine, and each stand-in holds what the image it
// stands for provides to those Dockerfiles.
func TestStandInBaseImages(t *testing.T) {
	repo, err := world.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, f := range []string{"Dockerfile.agent", "Dockerfile.writer", "e2e/kind/Dockerfile.router"} {
		for _, ref := range fromLines(t, filepath.Join(repo, f)) {
			named[ref] = true
		}
	}
	named["docker/dockerfile:1"] = true // the syntax line's frontend
	for ref := range named {
		if _, err := output("docker", "image", "inspect", ref); err != nil {
			t.Errorf("%s, named by a Dockerfile, is not in the engine", ref)
		}
	}

	t.Run("distroless static: passwd and group with nonroot, CA certificates, tzdata, user 65532", func(t *testing.T) {
		ref := "gcr.io/distroless/static-debian12:nonroot"
		standInOnly(t, ref)
		files := exportFiles(t, ref)
		for _, want := range []struct{ file, holds string }{
			{"etc/passwd", "nonroot:x:65532:65532:"},
			{"etc/group", "nonroot:x:65532:"},
			{"etc/ssl/certs/ca-certificates.crt", "-----BEGIN CERTIFICATE-----"},
			{"usr/share/zoneinfo/Etc/UTC", "TZif"},
		} {
			if !strings.Contains(files[want.file], want.holds) {
				t.Errorf("%s: %s does not hold %q", ref, want.file, want.holds)
			}
		}
		if u, _ := output("docker", "image", "inspect", "-f", "{{.Config.User}}", ref); strings.TrimSpace(u) != "65532" {
			t.Errorf("%s runs as %q, want 65532 (nonroot)", ref, u)
		}
	})

	t.Run("golang: the Go toolchain the tag names", func(t *testing.T) {
		ref := "golang:1.26-bookworm"
		standInOnly(t, ref)
		v, err := output("docker", "run", "--rm", ref, "go", "version")
		if err != nil || !strings.HasPrefix(v, "go version go1.26") {
			t.Errorf("%s: go version = %q, %v; want go1.26", ref, v, err)
		}
		gopath, _ := output("docker", "run", "--rm", ref, "go", "env", "GOMODCACHE")
		if strings.TrimSpace(gopath) != "/go/pkg/mod" {
			t.Errorf("%s: GOMODCACHE %q, want the golang image's /go/pkg/mod (the Dockerfiles' cache mount)", ref, gopath)
		}
	})
}

// fromLines returns the image references of a Dockerfile's FROM lines, stages
// named earlier left out.
func fromLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]bool{}
	var refs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		rest := fields[1:]
		for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
			rest = rest[1:]
		}
		if len(rest) >= 3 && strings.EqualFold(rest[1], "AS") {
			stages[rest[2]] = true
		}
		if !stages[rest[0]] || len(rest) >= 3 {
			refs = append(refs, rest[0])
		}
	}
	return refs
}

func standInOnly(t *testing.T, ref string) {
	t.Helper()
	l, err := output("docker", "image", "inspect", "-f", "{{index .Config.Labels \""+standInLabel+"\"}}", ref)
	if err != nil || strings.TrimSpace(l) != "true" {
		t.Skipf("%s is the pulled image, not a stand-in", ref)
	}
}

// exportFiles returns the regular files of an image's filesystem (small ones
// whole, as text).
func exportFiles(t *testing.T, ref string) map[string]string {
	t.Helper()
	id, err := output("docker", "create", ref, "/nonexistent")
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	defer exec.Command("docker", "rm", id).Run()
	cmd := exec.Command("docker", "export", id)
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
			b, _ := io.ReadAll(tr)
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return files
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
