// Package harness runs paywarden the way `make dev` does — a local control
// plane (the envtest kube-apiserver and etcd), paysim, the manager and the
// webhook receiver as separate processes — with the instruments the
// benchmark (test/bench) and the chaos soak (test/soak) need: API-server and
// etcd metrics, a restart of the API server alone (etcd keeps running),
// process RSS and CPU from /proc, kill -9 and restart of any process,
// Prometheus scrapes, and recording proxies that time-stamp every provider
// call and every webhook delivery.
//
// Nothing here is used by paywarden itself; it only measures and abuses it.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/localnet"
	"github.com/paywarden/paywarden/internal/scheme"
)

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	// Config is the admin user's; client-side rate limiting is off, as in
	// the manager and the receiver (controller-runtime's default).
	Config *rest.Config
	// Client is an uncached client with the admin user.
	Client client.Client
	// Kubeconfig is the path of the admin kubeconfig the processes use.
	Kubeconfig string

	env     *envtest.Environment
	http    *http.Client
	etcdURL string
	dir     string
	// restarted is the kube-apiserver started by RestartAPIServer; nil while
	// envtest's own process runs.
	restarted *exec.Cmd
	restartCh chan struct{}
}

// StartControlPlane starts etcd and kube-apiserver from assets (a directory
// holding both binaries), installs the CRDs in crdDir and writes the admin
// kubeconfig into dir.
func StartControlPlane(crdDir, assets, dir string) (*ControlPlane, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env, err := controlplane.Start(assets, crdDir)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{env: env, dir: dir}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cp.Config = cfg
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		cp.Stop()
		return nil, err
	}
	if cp.http, err = rest.HTTPClientFor(cfg); err != nil {
		cp.Stop()
		return nil, err
	}
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		cp.Stop()
		return nil, err
	}
	if u := env.ControlPlane.Etcd.URL; u != nil {
		cp.etcdURL = u.String()
	}
	return cp, nil
}

// Stop stops the API server (ours, if it was restarted) and etcd.
func (cp *ControlPlane) Stop() {
	if cp.restarted != nil {
		_ = cp.restarted.Process.Signal(syscall.SIGTERM)
		select {
		case <-cp.restartCh:
		case <-time.After(20 * time.Second):
			_ = cp.restarted.Process.Kill()
			<-cp.restartCh
		}
		cp.restarted = nil
	}
	if cp.env != nil {
		_ = cp.env.Stop()
		cp.env = nil
	}
}

// APIServerPID is the pid of the running kube-apiserver.
func (cp *ControlPlane) APIServerPID() (int, error) {
	if cp.restarted != nil {
		return cp.restarted.Process.Pid, nil
	}
	return childByName(os.Getpid(), "kube-apiserver")
}

// EtcdPID is the pid of etcd.
func (cp *ControlPlane) EtcdPID() (int, error) {
	return childByName(os.Getpid(), "etcd")
}

// RestartAPIServer stops kube-apiserver (SIGTERM; etcd keeps running), keeps
// it down for down, then starts it again with the same arguments — the same
// port, certificates and users — and waits until it is ready. Clients keep
// their kubeconfig; they see the API server vanish and come back.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	pid, err := cp.APIServerPID()
	if err != nil {
		return err
	}
	args, err := cmdline(pid)
	if err != nil {
		return err
	}
	// SIGTERM lets it drain (its watches hold that up for a minute), so
	// after 10 s it is killed. It stops serving at once: the outage starts
	// now either way.
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	if waitGone(pid, 10*time.Second) != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if err := waitGone(pid, 10*time.Second); err != nil {
			return err
		}
	}
	if cp.restarted != nil {
		<-cp.restartCh
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(stopped.Add(down))):
	}
	log, err := os.OpenFile(filepath.Join(cp.dir, "kube-apiserver-restarted.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	cp.restarted, cp.restartCh = cmd, done
	return cp.WaitReady(ctx, 60*time.Second)
}

// WaitReady polls /readyz until the API server answers 200.
func (cp *ControlPlane) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := localnet.Poll(ctx, timeout, func(ctx context.Context) error {
		b, code, err := cp.get(ctx, cp.url("/readyz"))
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("readyz %d: %s", code, strings.TrimSpace(string(b)))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

// APIRequests scrapes kube-apiserver's apiserver_request_total.
func (cp *ControlPlane) APIRequests(ctx context.Context) (Samples, error) {
	b, code, err := cp.get(ctx, cp.url("/metrics"))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("apiserver %s: %d: %.200s", cp.url("/metrics"), code, b)
	}
	return ParseMetrics(string(b), "apiserver_request_total"), nil
}

// EtcdDBSize is etcd's database size in bytes (etcd_mvcc_db_total_size_in_bytes)
// and the part in use (…_in_use_in_bytes).
func (cp *ControlPlane) EtcdDBSize(ctx context.Context) (total, inUse float64, err error) {
	if cp.etcdURL == "" {
		return 0, 0, errors.New("etcd URL unknown")
	}
	resp, err := http.Get(cp.etcdURL + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	s := ParseMetrics(string(b), "etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes")
	return s.Sum("etcd_mvcc_db_total_size_in_bytes", nil), s.Sum("etcd_mvcc_db_total_size_in_use_in_bytes", nil), nil
}

// GetRaw reads path from the API server as JSON and returns the body: the
// size of what etcd stores for a custom resource (JSON, managed fields included).
func (cp *ControlPlane) GetRaw(ctx context.Context, path string) ([]byte, error) {
	b, code, err := cp.get(ctx, cp.url(path))
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", path, code)
	}
	return b, nil
}

func (cp *ControlPlane) url(path string) string {
	host := strings.TrimRight(cp.Config.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	return host + path
}

func (cp *ControlPlane) get(ctx context.Context, url string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := cp.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// childByName finds a direct child of parent whose command name is name.
func childByName(parent int, name string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		if st.ppid == parent && st.comm == name {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process started by pid %d", name, parent)
}

func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) == 0 || args[0] == "" {
		return nil, fmt.Errorf("empty command line of pid %d", pid)
	}
	return args, nil
}

func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, err := readStat(pid)
		if err != nil || st.state == "Z" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("pid %d still running after %s", pid, timeout)
}
