package image_test

import (
	"archive/tar"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/image"
)

func options(t *testing.T) image.Options {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return image.Options{
		Root: root, Out: t.TempDir(), Tag: "registry.example/paywarden:v1.2.3-test",
		Version: "v1.2.3-test", Revision: "0123456789abcdef0123456789abcdef01234567",
		Source: "https://github.com/paywarden/paywarden", Created: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Platform: image.Linux(runtime.GOARCH),
	}
}

func build(t *testing.T, o image.Options) *image.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := image.Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The image `make image` writes: both outputs hold one image, whose config
// runs the manager as the non-root user with the OCI labels, whose layers
// hold exactly the three static binaries (owned by root, stamped with the
// commit time), each of which starts; and a second build of the same commit,
// by `make image`'s own command in a process of its own, has the same digest.
func TestImageIsStaticNonRootLabelledAndReproducible(t *testing.T) {
	o := options(t)
	r := build(t, o)
	t.Logf("digest %s, %d bytes in a registry, %d unpacked", r.Digest, r.Size, r.Unpacked)

	tag, err := name.NewTag(o.Tag)
	if err != nil {
		t.Fatal(err)
	}
	fromTarball, err := tarball.ImageFromPath(r.Tarball, &tag)
	if err != nil {
		t.Fatalf("the tarball is not a loadable image tagged %s: %v", o.Tag, err)
	}
	idx, err := layout.ImageIndexFromPath(r.Layout)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("the layout's index holds %d manifests (%v), want 1", len(im.Manifests), err)
	}
	if got := im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != tag.TagStr() {
		t.Errorf("layout names the image %q, want %q", got, tag.TagStr())
	}
	fromLayout, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := fromLayout.Digest(); err != nil || d != r.Digest {
		t.Errorf("the layout holds %s (%v), built %s", d, err, r.Digest)
	}
	// A docker archive keeps no manifest: what it shares with the image is
	// the config (the image ID `docker load` reports) and the layers.
	for what, get := range map[string]func(v1.Image) (any, error){
		"config": func(i v1.Image) (any, error) { return i.ConfigName() },
		"layers": func(i v1.Image) (any, error) {
			m, err := i.Manifest()
			if err != nil {
				return nil, err
			}
			var ds []string
			for _, l := range m.Layers {
				ds = append(ds, l.Digest.String())
			}
			return strings.Join(ds, ","), nil
		},
	} {
		a, errA := get(fromTarball)
		b, errB := get(fromLayout)
		if errA != nil || errB != nil || a != b {
			t.Errorf("the tarball's %s %v (%v) differ from the layout's %v (%v)", what, a, errA, b, errB)
		}
	}

	img := fromLayout
	mt, _ := img.MediaType()
	if mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/paywarden-manager"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want the manager alone", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if !cf.Created.Time.Equal(o.Created) {
		t.Errorf("created %s, want the commit time %s", cf.Created.Time, o.Created)
	}
	for k, want := range map[string]string{
		image.LabelSource: o.Source, image.LabelRevision: o.Revision, image.LabelVersion: o.Version,
		image.LabelCreated: "2026-11-29T10:00:00Z",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations[image.LabelRevision] != o.Revision {
		t.Errorf("manifest annotations %v lack the revision", m.Annotations)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(image.Entrypoints) {
		t.Fatalf("%d layers, want one per entrypoint (%d)", len(layers), len(image.Entrypoints))
	}
	dir := t.TempDir()
	for i, l := range layers {
		e := image.Entrypoints[i]
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			t.Errorf("layer %d media type %s", i, mt)
		}
		bin := unpackOne(t, l, e.Path, o.Created, dir)
		checkStatic(t, bin)
		out, err := exec.Command(bin, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage") {
			t.Errorf("%s --help: %v\n%s", e.Path, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "paywarden-manager"), "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "paywarden manager "+o.Version {
		t.Errorf("paywarden-manager --version: %v: %q", err, out)
	}

	if again := buildWithCommand(t, o); again != r.Digest.String() {
		t.Errorf("a second build of the same commit gives %s, the first %s", again, r.Digest)
	}
}

// buildWithCommand builds the image of o again with hack/image (`make
// image`), binaries included, into a directory of its own, and returns the
// digest it reports. It runs outside the test binary, so the layers are
// compressed and hashed at full speed when the tests run with the race
// detector.
func buildWithCommand(t *testing.T, o image.Options) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/image", "-root", o.Root, "-out", t.TempDir(),
		"-tag", o.Tag, "-version", o.Version, "-revision", o.Revision, "-source", o.Source,
		"-created", strconv.FormatInt(o.Created.Unix(), 10), "-arch", o.Platform.Arch)
	cmd.Dir = o.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/image: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^digest\s+(\S+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("hack/image reported no digest:\n%s", out)
	}
	return string(m[1])
}

// unpackOne checks that layer l holds exactly one regular file, at path,
// executable, owned by root and stamped created, and writes it into dir.
func unpackOne(t *testing.T, l v1.Layer, path string, created time.Time, dir string) string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatalf("layer of %s: %v", path, err)
	}
	if "/"+hdr.Name != path || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(created) {
		t.Errorf("layer of %s holds %s mode %o uid %d gid %d mtime %s", path, hdr.Name, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime)
	}
	bin := filepath.Join(dir, filepath.Base(path))
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, tr); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if next, err := tr.Next(); err != io.EOF {
		t.Errorf("layer of %s holds more than it: %v %v", path, next, err)
	}
	return bin
}

// checkStatic: no program interpreter and no shared library, so the binary
// runs on an empty base.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not ELF: %v", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (%s)", bin, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs %v", bin, libs)
	}
}

// The Dockerfile builds the same programs, to the same paths, with the same
// flags as `make image`.
func TestDockerfileBuildsTheSameBinaries(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := strings.ReplaceAll(string(b), "\\\n", " ")
	if !strings.Contains(df, "CGO_ENABLED=0") {
		t.Error("the Dockerfile does not build with CGO_ENABLED=0")
	}
	flags := strings.Join(image.BuildFlags("${VERSION}")[:2], " ") + " -ldflags=\"" + image.BuildFlags("${VERSION}")[3] + "\""
	build := regexp.MustCompile(`go build (.+?) -o /out(/\S+) (\./cmd/\S+)`)
	var got []image.Entrypoint
	for _, m := range build.FindAllStringSubmatch(df, -1) {
		if m[1] != flags {
			t.Errorf("the Dockerfile builds %s with %s, make image with %s", m[3], m[1], flags)
		}
		got = append(got, image.Entrypoint{Path: m[2], Package: m[3]})
	}
	if !slices.Equal(got, image.Entrypoints) {
		t.Errorf("the Dockerfile builds %v, make image %v", got, image.Entrypoints)
	}
	if !strings.Contains(df, "USER "+image.User) || !strings.Contains(df, `ENTRYPOINT ["`+image.Entrypoints[0].Path+`"]`) {
		t.Errorf("the Dockerfile's user or entrypoint differs from the image's (%s, %s)", image.User, image.Entrypoints[0].Path)
	}
}
