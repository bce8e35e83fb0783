// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest, through internal/controlplane) with paywarden's CRDs installed, for
// the suites that must prove behaviour against an API server rather than a
// fake, and gives them a client and the shipped RBAC.
//
// A missing control plane is an error, never a skip: a suite that silently
// does not run proves nothing.
package testenv

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/scheme"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Root is the module root, for tests that need files of the repository.
	Root string
	env  *envtest.Environment
}

// Scheme returns a scheme with the core Kubernetes kinds and paywarden's.
func Scheme() *runtime.Scheme { return scheme.New() }

// Start starts the control plane and installs the CRDs from config/crd/bases.
func Start() (*Env, error) { return start(true) }

// StartBare starts the control plane with nothing of paywarden's installed,
// for tests that install what a user would (config/default, the Helm chart)
// and must fail when it lacks a CRD.
func StartBare() (*Env, error) { return start(false) }

func start(crds bool) (*Env, error) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return nil, err
	}
	crdDir := ""
	if crds {
		crdDir = controlplane.CRDs(root)
	}
	env, err := controlplane.Start(controlplane.Assets(root), crdDir)
	if err != nil {
		return nil, err
	}
	s := Scheme()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: s})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("build client: %w", err)
	}
	return &Env{Config: env.Config, Client: c, Scheme: s, Root: root, env: env}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	return e.env.Stop()
}
