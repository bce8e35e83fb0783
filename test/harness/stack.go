package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/localnet"
)

// Options shape a Stack.
type Options struct {
	// Root is this module's root: paysim is built from it, and the CRDs are
	// read from it unless Src is set.
	Root string
	// Src is the source tree whose manager and receiver run (and whose CRDs
	// are installed); default Root. Another checkout measures its binaries.
	Src string
	// Dir holds binaries, logs and the kubeconfig.
	Dir string
	// Assets holds kube-apiserver and etcd (KUBEBUILDER_ASSETS).
	Assets string
	// PaysimArgs are extra paysim flags (faults, time factor, ...).
	PaysimArgs []string
	// ManagerArgs and ReceiverArgs are extra flags of the processes.
	ManagerArgs, ReceiverArgs []string
	// Managers is how many manager processes run (default 1): more than one
	// only makes sense with --leader-election in ManagerArgs, as replicas of
	// a Deployment would.
	Managers int
	// Log receives progress lines.
	Log io.Writer
}

// SystemNamespace is paywarden's own namespace (the manager's and the
// receiver's default --bundle-namespace).
const SystemNamespace = "paywarden-system"

// Stack is a control plane, one paysim, and the manager and receiver as
// processes (built, not yet started: StartManager, StartReceiver).
type Stack struct {
	CP  *ControlPlane
	Sim Paysim

	Paysim *Proc
	// Manager is the first manager; Managers are all of them (named
	// manager, manager-2, ...), each with its own metrics and probe port.
	Manager  *Proc
	Managers []*Proc
	Receiver *Proc

	// ReceiverURL serves /webhooks/; ManagerMetrics and ReceiverMetrics are
	// the /metrics URLs (ManagerMetrics the first manager's, ManagersMetrics
	// every manager's, in the order of Managers).
	ReceiverURL     string
	ManagerMetrics  string
	ManagersMetrics []string
	ReceiverMetrics string
	managerProbes   []string

	opts Options
}

// Start builds the binaries, starts the control plane and paysim.
func Start(ctx context.Context, opts Options) (s *Stack, err error) {
	if opts.Src == "" {
		opts.Src = opts.Root
	}
	// Binaries are built in Src, so every path must be absolute.
	for _, p := range []*string{&opts.Root, &opts.Src, &opts.Dir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Assets == "" {
		opts.Assets = controlplane.Assets(opts.Root)
	}
	s = &Stack{opts: opts}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	binDir, toolDir, logDir := filepath.Join(opts.Dir, "bin"), filepath.Join(opts.Dir, "tools"), filepath.Join(opts.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	s.logf("building manager and receiver from %s", opts.Src)
	if err := Build(ctx, opts.Src, binDir, "./cmd/manager", "./cmd/receiver"); err != nil {
		return nil, err
	}
	if err := Build(ctx, opts.Root, toolDir, "./cmd/paysim"); err != nil {
		return nil, err
	}
	s.logf("starting the control plane (%s)", opts.Assets)
	if s.CP, err = StartControlPlane(controlplane.CRDs(opts.Src), opts.Assets, opts.Dir); err != nil {
		return nil, err
	}
	// The manager keeps the receiver's webhook verification bundles in its
	// own namespace, which both default to outside a pod.
	if err := s.CP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", SystemNamespace, err)
	}
	managers := max(opts.Managers, 1)
	ports, err := localnet.FreePorts(3 + 2*managers)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	simAddr, receiverAddr, receiverMetrics := addr(0), addr(1), addr(2)
	s.Sim = newPaysim("http://" + simAddr)
	s.ReceiverURL = "http://" + receiverAddr
	s.ReceiverMetrics = "http://" + receiverMetrics + "/metrics"
	kube := []string{"KUBECONFIG=" + s.CP.Kubeconfig}
	s.Paysim = &Proc{Name: "paysim", Bin: filepath.Join(toolDir, "paysim"), Log: filepath.Join(logDir, "paysim.log"),
		Args: append([]string{"--addr", simAddr, "--log-level", "warn"}, opts.PaysimArgs...)}
	s.Receiver = &Proc{Name: "receiver", Bin: filepath.Join(binDir, "receiver"), Log: filepath.Join(logDir, "receiver.log"), Env: kube,
		Args: append([]string{"--bind-address", receiverAddr, "--metrics-bind-address", receiverMetrics}, opts.ReceiverArgs...)}
	for i := range managers {
		name := "manager"
		if i > 0 {
			name = fmt.Sprintf("manager-%d", i+1)
		}
		metrics, probe := addr(3+2*i), addr(4+2*i)
		s.Managers = append(s.Managers, &Proc{Name: name, Bin: filepath.Join(binDir, "manager"), Log: filepath.Join(logDir, name+".log"), Env: kube,
			Args: append([]string{"--metrics-bind-address", metrics, "--health-probe-bind-address", probe}, opts.ManagerArgs...)})
		s.ManagersMetrics = append(s.ManagersMetrics, "http://"+metrics+"/metrics")
		s.managerProbes = append(s.managerProbes, "http://"+probe)
	}
	s.Manager, s.ManagerMetrics = s.Managers[0], s.ManagersMetrics[0]
	if err := s.Paysim.Start(); err != nil {
		return nil, err
	}
	if err := localnet.WaitHTTP(ctx, s.Sim.URL+"/healthz", 30*time.Second); err != nil {
		return nil, fmt.Errorf("paysim did not come up: %w (log %s)", err, s.Paysim.Log)
	}
	return s, nil
}

func (s *Stack) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "harness: "+format+"\n", args...)
}

// StartManager starts (or restarts) the (first) manager and waits for /readyz.
func (s *Stack) StartManager(ctx context.Context) error {
	return s.startManager(ctx, 0)
}

// StartManagers starts every manager and waits until each is ready (with
// leader election, one of them leads and the others wait).
func (s *Stack) StartManagers(ctx context.Context) error {
	for i := range s.Managers {
		if err := s.startManager(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) startManager(ctx context.Context, i int) error {
	m := s.Managers[i]
	if err := m.Start(); err != nil {
		return err
	}
	if err := localnet.WaitHTTP(ctx, s.managerProbes[i]+"/readyz", 60*time.Second); err != nil {
		return fmt.Errorf("%s not ready: %w (log %s)", m.Name, err, m.Log)
	}
	return nil
}

// StartReceiver starts (or restarts) the receiver and waits for /readyz
// (its caches synced).
func (s *Stack) StartReceiver(ctx context.Context) error {
	if err := s.Receiver.Start(); err != nil {
		return err
	}
	if err := localnet.WaitHTTP(ctx, s.ReceiverURL+"/readyz", 60*time.Second); err != nil {
		return fmt.Errorf("receiver not ready: %w (log %s)", err, s.Receiver.Log)
	}
	return nil
}

// Stop stops the processes in reverse order of start, then the control plane.
func (s *Stack) Stop() {
	procs := append(append([]*Proc(nil), s.Managers...), s.Receiver, s.Paysim)
	for _, p := range procs {
		if p != nil {
			p.Stop(15 * time.Second)
		}
	}
	if s.CP != nil {
		s.CP.Stop()
	}
}
