// Command image builds paywarden's container image without a container
// engine (`make image`): static binaries of the three entrypoints, assembled
// with go-containerregistry on an empty base, written to an OCI layout and a
// tarball that `docker load`, `podman load` and `crane push` accept. Every
// timestamp is the commit's, so the same commit gives the same digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/paywarden/paywarden/internal/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o       image.Options
		created string
		arch    string
	)
	flag.StringVar(&o.Root, "root", ".", "module root to build")
	flag.StringVar(&o.Out, "out", "bin/image", "directory for rootfs/, oci/ and paywarden.tar")
	flag.StringVar(&o.Tag, "tag", "", "image name and tag (default paywarden:<version>)")
	flag.StringVar(&o.Version, "version", "", "version stamped and labelled (default: git describe --tags --always --dirty)")
	flag.StringVar(&o.Revision, "revision", "", "commit labelled (default: git rev-parse HEAD)")
	flag.StringVar(&o.Source, "source", "https://github.com/paywarden/paywarden", "repository URL labelled")
	flag.StringVar(&created, "created", "", "Unix time of every timestamp in the image (default: the commit time, git log -1 --format=%ct)")
	flag.StringVar(&arch, "arch", runtime.GOARCH, "linux architecture to build for")
	flag.Parse()

	var err error
	if o.Version == "" {
		if o.Version, err = git(o.Root, "describe", "--tags", "--always", "--dirty"); err != nil {
			return err
		}
	}
	if o.Revision == "" {
		if o.Revision, err = git(o.Root, "rev-parse", "HEAD"); err != nil {
			return err
		}
	}
	if created == "" {
		if created, err = git(o.Root, "log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: %w", created, err)
	}
	o.Created = time.Unix(secs, 0)
	if o.Tag == "" {
		o.Tag = "paywarden:" + o.Version
	}
	o.Platform = image.Linux(arch)

	r, err := image.Build(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Printf("image    %s (%s, version %s, revision %s)\n", o.Tag, o.Platform.OS+"/"+o.Platform.Arch, o.Version, o.Revision)
	fmt.Printf("digest   %s\n", r.Digest)
	fmt.Printf("size     %.1f MiB in a registry, %.1f MiB unpacked\n", float64(r.Size)/(1<<20), float64(r.Unpacked)/(1<<20))
	fmt.Printf("layout   %s   (crane push %s <registry>/%s)\n", r.Layout, r.Layout, o.Tag)
	fmt.Printf("tarball  %s   (docker load -i / podman load -i)\n", r.Tarball)
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
