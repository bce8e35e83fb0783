// Package image builds paywarden's container image without a container
// engine: the static binaries of its entrypoints (BuildBinaries), then an OCI
// image of them on an empty base (Assemble), written as an OCI layout and as
// a tarball that `docker load`, `podman load` and `crane push` accept.
// hack/image is its command (`make image`); the deploy test runs the same
// binaries the image ships.
package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Entrypoint is one program of the image.
type Entrypoint struct {
	// Path is where the image holds the binary: the command a Deployment runs.
	Path string
	// Package is its main package, relative to the module root.
	Package string
}

// Entrypoints are the image's programs; the first is its entrypoint. The
// Dockerfile builds the same ones (a test holds it to this list).
var Entrypoints = []Entrypoint{
	{Path: "/paywarden-manager", Package: "./cmd/manager"},
	{Path: "/paywarden-receiver", Package: "./cmd/receiver"},
	{Path: "/paysim", Package: "./cmd/paysim"},
}

// Platform is the operating system and architecture the binaries are built for.
type Platform struct{ OS, Arch string }

// Linux is linux on arch (amd64, arm64, ...).
func Linux(arch string) Platform { return Platform{OS: "linux", Arch: arch} }

// BuildFlags are the `go build` flags of every binary the image ships:
// no paths of the build machine, no VCS stamp (the Dockerfile builds without
// .git), no build id, stripped, and the version in main.version. With
// CGO_ENABLED=0 (BuildEnv) the same sources and toolchain give the same bytes.
func BuildFlags(version string) []string {
	return []string{"-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid= -X main.version=" + version}
}

// BuildEnv is the environment of the builds: static binaries for p, with the
// caller's module settings (GOPROXY, GOFLAGS, caches) kept.
func BuildEnv(p Platform) []string {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Arch}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "CGO_ENABLED" && k != "GOOS" && k != "GOARCH" {
			env = append(env, kv)
		}
	}
	return env
}

// BuildBinaries builds the entrypoints of the module at root for p into
// outDir (all of Entrypoints when none are given), each named like its path
// in the image, and returns image path -> local file.
func BuildBinaries(ctx context.Context, root, outDir, version string, p Platform, eps ...Entrypoint) (map[string]string, error) {
	if len(eps) == 0 {
		eps = Entrypoints
	}
	// One go build links the programs in parallel; each lands under its
	// package's name in a scratch directory, then takes its image name.
	scratch, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return nil, err
		}
		if scratch, err = os.MkdirTemp(outDir, ".build-"); err != nil {
			return nil, err
		}
	}
	defer os.RemoveAll(scratch)
	args := append([]string{"build"}, BuildFlags(version)...)
	args = append(args, "-o", scratch+string(filepath.Separator))
	for _, e := range eps {
		args = append(args, e.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, BuildEnv(p)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	out := map[string]string{}
	for _, e := range eps {
		bin := filepath.Join(outDir, path.Base(e.Path))
		if err := os.Rename(filepath.Join(scratch, path.Base(e.Package)), bin); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Package, err)
		}
		out[e.Path] = bin
	}
	return out, nil
}
