package deploy_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/test/deploy"
)

// What `make deploy` applies (config/default, rendered as `kubectl
// kustomize` does) runs paywarden on an API server that has nothing else of
// it: every CRD, the Deployments' commands, arguments, environment, ports
// and probes, the Services, and the ServiceAccounts' RBAC. A missing CRD or
// Role rule, a broken probe path or port, or an argument the program does
// not know fails it. `make undeploy` deletes the same render.
func TestDefaultOverlayRunsPaywarden(t *testing.T) {
	env, err := testenv.StartBare()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	m, err := testenv.Render(env.Root, "config/default")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Objects(m)
	if err != nil {
		t.Fatal(err)
	}
	deploy.Prove(t, env, objs, deploy.BuildBinaries(t, env.Root, t.TempDir()))
}
