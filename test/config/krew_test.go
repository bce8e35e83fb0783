package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/internal/controlplane"
)

// TestKrewManifest: plugins/paywarden.yaml installs kubectl-paywarden on
// linux and darwin, amd64 and arm64, from the release of its version, each
// archive with a sha256 of the right form (placeholders until a release).
func TestKrewManifest(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "plugins", "paywarden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
		Spec             struct {
			Version, Homepage, ShortDescription string
			Platforms                           []struct {
				Selector         struct{ MatchLabels map[string]string } `json:"selector"`
				URI, Sha256, Bin string
			}
		}
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "paywarden" || m.Spec.ShortDescription == "" {
		t.Errorf("manifest header %+v", m)
	}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	var got []string
	for _, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		got = append(got, goos+"/"+arch)
		want := "https://github.com/paywarden/paywarden/releases/download/" + m.Spec.Version + "/kubectl-paywarden_" + goos + "_" + arch + ".tar.gz"
		if p.URI != want || !hex.MatchString(p.Sha256) || p.Bin != "kubectl-paywarden" {
			t.Errorf("%s/%s: uri %q (want %q), sha256 %q, bin %q", goos, arch, p.URI, want, p.Sha256, p.Bin)
		}
	}
	slices.Sort(got)
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		t.Errorf("platforms %v, want %v", got, want)
	}
}
