package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's user: the "nonroot" user of distroless images, so a
// pod's runAsNonRoot holds without naming a user.
const User = "65532:65532"

// The OCI annotation keys the image carries as labels and as manifest
// annotations (https://github.com/opencontainers/image-spec, annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	refName       = "org.opencontainers.image.ref.name"
)

// Options describe an image.
type Options struct {
	// Root is the module root the binaries are built from.
	Root string
	// Out receives the binaries (rootfs/), the OCI layout (oci/) and the
	// tarball (paywarden.tar).
	Out string
	// Tag names the image in the tarball (`docker load` tags it so) and in
	// the layout's index.
	Tag string
	// Version is stamped into the binaries (main.version) and labelled.
	Version string
	// Revision is the commit the image is built from.
	Revision string
	// Source is the repository's URL.
	Source string
	// Created is the commit's time: every timestamp in the image is it, so
	// the same commit gives the same digest.
	Created  time.Time
	Platform Platform
}

// Result is a built image.
type Result struct {
	Image   v1.Image
	Digest  v1.Hash
	Layout  string // OCI image layout directory
	Tarball string // docker-archive tarball
	// Size is what a registry stores (manifest, config and compressed
	// layers); Unpacked is the binaries' total size on disk.
	Size, Unpacked int64
}

// Build builds the binaries and the image and writes the layout and the
// tarball under o.Out, replacing what an earlier build left there.
func Build(ctx context.Context, o Options) (*Result, error) {
	bins, err := BuildBinaries(ctx, o.Root, filepath.Join(o.Out, "rootfs"), o.Version, o.Platform)
	if err != nil {
		return nil, err
	}
	img, err := Assemble(bins, o)
	if err != nil {
		return nil, err
	}
	r := &Result{Image: img, Layout: filepath.Join(o.Out, "oci"), Tarball: filepath.Join(o.Out, "paywarden.tar")}
	if r.Digest, err = img.Digest(); err != nil {
		return nil, err
	}
	ref, err := name.NewTag(o.Tag)
	if err != nil {
		return nil, fmt.Errorf("tag %q: %w", o.Tag, err)
	}
	if err := os.RemoveAll(r.Layout); err != nil {
		return nil, err
	}
	p, err := layout.Write(r.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: ref.TagStr()})); err != nil {
		return nil, fmt.Errorf("write OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(r.Tarball, ref, img); err != nil {
		return nil, fmt.Errorf("write tarball: %w", err)
	}
	if r.Size, err = storedSize(img); err != nil {
		return nil, err
	}
	for _, b := range bins {
		st, err := os.Stat(b)
		if err != nil {
			return nil, err
		}
		r.Unpacked += st.Size()
	}
	return r, nil
}

// Assemble makes the image of bins (image path -> file, from
// BuildBinaries): an empty base, one layer per entrypoint in the order of
// Entrypoints, the non-root user, the first entrypoint as the entrypoint,
// and the OCI labels.
func Assemble(bins map[string]string, o Options) (v1.Image, error) {
	created := o.Created.UTC().Truncate(time.Second)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, e := range Entrypoints {
		file, ok := bins[e.Path]
		if !ok {
			return nil, fmt.Errorf("no binary for %s", e.Path)
		}
		layer, err := fileLayer(e.Path, file, created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "go build " + e.Package, Comment: "paywarden image builder"},
		})
		if err != nil {
			return nil, err
		}
	}
	labels := map[string]string{
		LabelSource: o.Source, LabelRevision: o.Revision, LabelVersion: o.Version,
		LabelCreated: created.Format(time.RFC3339), LabelTitle: "paywarden",
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture = o.Platform.OS, o.Platform.Arch
	cf.Config.User = User
	cf.Config.Entrypoint = []string{Entrypoints[0].Path}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// fileLayer is a layer holding one executable at imagePath, owned by root,
// with mtime created: its bytes depend on the file alone.
func fileLayer(imagePath, file string, created time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: path.Clean(imagePath)[1:], Mode: 0o755, Size: int64(len(data)),
		ModTime: created, Format: tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// storedSize is what a registry stores for img.
func storedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
