// Package controlplane starts a local Kubernetes control plane from a
// paywarden checkout: the kube-apiserver and etcd that controller-runtime's
// envtest runs, with paywarden's CRDs installed. `make dev` (internal/devenv),
// `make bench` and the soak (test/harness) and the envtest suites
// (internal/testenv) all start theirs here.
//
// The binaries come from KUBEBUILDER_ASSETS, or from bin/k8s at the module
// root, where `make envtest` builds them from Go modules. A missing binary is
// an error that says how to get it.
package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paywarden/paywarden/internal/scheme"
)

// module is the module path ModuleRoot looks for.
const module = "github.com/paywarden/paywarden"

// ModuleRoot finds the directory of paywarden's go.mod from the working
// directory upwards (go test runs in the package directory; make runs at
// the root).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(b) > 0 && modulePath(b) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("module root of %s not found above the working directory", module)
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	var path string
	if _, err := fmt.Sscanf(string(gomod), "module %s", &path); err != nil {
		return ""
	}
	return path
}

// Assets is the directory holding kube-apiserver, etcd and kubectl:
// KUBEBUILDER_ASSETS when set, else bin/k8s under the module root.
func Assets(root string) string {
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		return assets
	}
	return filepath.Join(root, "bin", "k8s")
}

// CRDs is the directory of paywarden's generated CRDs under a module root.
func CRDs(root string) string {
	return filepath.Join(root, "config", "crd", "bases")
}

// StartTimeout bounds the wait for etcd and kube-apiserver to come up.
const StartTimeout = 2 * time.Minute

// Start starts etcd and kube-apiserver from assets and installs the CRDs in
// crdDir ("" installs none, for callers that install what a user would).
// The environment's Config and KubeConfig are the admin user's; Stop ends
// both processes.
func Start(assets, crdDir string) (*envtest.Environment, error) {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("control plane binaries not found in %s (%v): run `make envtest` or set KUBEBUILDER_ASSETS", assets, err)
		}
	}
	// A loaded machine (every envtest package of a test run starting its
	// own control plane at once) can take longer than envtest's default 20 s
	// to bring kube-apiserver up; a wait that is long enough costs nothing
	// when it comes up at once.
	env := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: scheme.New(),
		ControlPlaneStartTimeout: StartTimeout}
	if crdDir != "" {
		env.CRDDirectoryPaths = []string{crdDir}
		env.ErrorIfCRDPathMissing = true
	}
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("start control plane from %s: %w", assets, err)
	}
	return env, nil
}
