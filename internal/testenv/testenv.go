// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest, through internal/controlplane) with paywarden's CRDs installed, for
// the suites that must prove behaviour against an API server rather than a
// fake, and gives them a client and the shipped RBAC.
//
// A missing control plane is an error, never a skip: a suite that silently
// does not run proves nothing.
package testenv

import (
	"errors"
	"fmt"
	"sync"

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

	mu     sync.Mutex
	shared map[string]any
	stops  []func() error
}

// Shared returns the value kept under key for this control plane, made by
// start (and stopped by its stop function, before the control plane) the
// first time it is asked for: one helper the tests of a package share, such
// as the webhook-bundle controller that one manager runs in a cluster.
func (e *Env) Shared(key string, start func() (any, func() error, error)) (any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.shared[key]; ok {
		return v, nil
	}
	v, stop, err := start()
	if err != nil {
		return nil, err
	}
	if e.shared == nil {
		e.shared = map[string]any{}
	}
	e.shared[key] = v
	e.stops = append(e.stops, stop)
	return v, nil
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

// Stop stops what the tests shared (Shared), then the control plane.
func (e *Env) Stop() error {
	e.mu.Lock()
	stops := e.stops
	e.stops, e.shared = nil, nil
	e.mu.Unlock()
	var errs []error
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	return errors.Join(append(errs, e.env.Stop())...)
}
