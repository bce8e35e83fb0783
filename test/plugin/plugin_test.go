// Package plugin_test runs the real `kubectl paywarden` against a real API
// server: the plugin is built, put on the PATH of the installed kubectl with
// a kubeconfig of the envtest control plane, and every command is run as an
// operator would run it. Reports are compared with golden files over the
// console fixture (fixture.CreateConsole: payments in every phase and review
// reason, their status written directly, no manager); the actions run
// against a manager wired as cmd/manager wires it and paysim, and are
// checked by what the manager did, and by what they refuse without writing
// anything.
package plugin_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the current output")

var (
	env *testenv.Env
	// binDir holds kubectl-paywarden (and its completion link); kubeconfig
	// points at env, in namespace shop; kubectlBin is the kubectl run.
	binDir, kubeconfig, kubectlBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(2))))
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return 1, err
	}
	if kubectlBin, err = findKubectl(root); err != nil {
		return 1, err
	}
	dir, err := os.MkdirTemp("", "kubectl-paywarden-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	binDir, kubeconfig = filepath.Join(dir, "bin"), filepath.Join(dir, "kubeconfig")
	// The plugin builds while the control plane starts.
	built := make(chan error, 1)
	go func() {
		// Static and -trimpath, like every binary the tests build (see
		// harness.Build).
		build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(binDir, "kubectl-paywarden"), "./cmd/kubectl-paywarden")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			built <- fmt.Errorf("build kubectl-paywarden: %v\n%s", err, out)
			return
		}
		built <- os.Symlink("kubectl-paywarden", filepath.Join(binDir, "kubectl_complete-paywarden"))
	}()
	env, err = testenv.Start()
	if err != nil {
		<-built
		return 1, err
	}
	defer func() { _ = env.Stop() }()
	if err := <-built; err != nil {
		return 1, err
	}
	if err := writeKubeconfig(kubeconfig); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// findKubectl is the kubectl the suite runs: $KUBECTL, else the one `make
// envtest` builds beside the control plane (in KUBEBUILDER_ASSETS, default
// bin/k8s), else the PATH's. None is an error, never a skip.
func findKubectl(root string) (string, error) {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k, nil
	}
	assets := controlplane.Assets(root)
	if k := filepath.Join(assets, "kubectl"); isExecutable(k) {
		return k, nil
	}
	k, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("no kubectl in $KUBECTL, %s or the PATH: run `make envtest`, or set KUBECTL: %w", assets, err)
	}
	return k, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// writeKubeconfig writes a kubeconfig of the control plane's admin, in
// namespace shop.
func writeKubeconfig(path string) error {
	rc := env.Config
	host := rc.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "shop"}
	cfg.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*cfg, path)
}

// result is what a kubectl run printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// kubectl runs `kubectl args...` with the plugin on the PATH and the
// kubeconfig of the control plane. A kubectl that could not run at all
// shows as exit status -1 with the error on stderr.
func kubectl(args ...string) result {
	cmd := exec.Command(kubectlBin, args...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, err.Error()
	}
	return r
}

// golden compares got with testdata/<name>.golden (or writes it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./test/plugin -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test ./test/plugin -update rewrites it):\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

var consoleOnce sync.Once

// consoleFixture creates the console fixture once for the tests that read it.
func consoleFixture(t *testing.T) {
	t.Helper()
	consoleOnce.Do(func() { fixture.CreateConsole(t, env.Client) })
}
