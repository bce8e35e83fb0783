package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the packages pkgs (e.g. "./cmd/manager") of the Go module
// in srcDir into outDir. srcDir may be another checkout of paywarden: the
// benchmark measures the binaries of whatever tree it is pointed at.
//
// They are built as the image builds them (static, -trimpath; see
// internal/image.BuildFlags): what runs is what ships, and the packages are
// compiled once for the image, the deploy test, the soak and the bench alike.
func Build(ctx context.Context, srcDir, outDir string, pkgs ...string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath", "-o", outDir + "/"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(pkgs, " "), srcDir, err, out)
	}
	return nil
}

// Proc is a child process that can be killed and started again with the
// same command line; its output is appended to one log file across starts.
type Proc struct {
	Name string
	Bin  string
	Args []string
	Env  []string
	Log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts []time.Time
}

// Start starts the process (again).
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.Name)
		}
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "\n==== harness: start %s at %s ====\n", p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C of the harness does not hit the children
	// before the harness stops them in order. If the harness dies, so do they.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done = cmd, done
	p.starts = append(p.starts, time.Now())
	return nil
}

// Supervise restarts the process whenever it exits, after backoff, until
// ctx ends — what a kubelet does for a pod with restartPolicy Always. A
// process that cannot start (its API server is down, say) is tried again.
func (p *Proc) Supervise(ctx context.Context, backoff time.Duration) {
	go func() {
		for {
			p.mu.Lock()
			done := p.done
			p.mu.Unlock()
			if done != nil {
				select {
				case <-ctx.Done():
					return
				case <-done:
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			_ = p.Start()
		}
	}()
}

// Starts are the times the process was started.
func (p *Proc) Starts() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.starts...)
}

// Kill sends SIGKILL (kill -9) and waits for the process to exit.
func (p *Proc) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit after SIGKILL", p.Name)
	}
}

// Stop sends SIGTERM, then SIGKILL after timeout, and waits.
func (p *Proc) Stop(timeout time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PID is the current process id (0 when not running).
func (p *Proc) PID() int {
	if !p.Running() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Memory is the resident set size and its peak (VmRSS, VmHWM) in bytes.
func (p *Proc) Memory() (rss, peak int64, err error) {
	pid := p.PID()
	if pid == 0 {
		return 0, 0, fmt.Errorf("%s is not running", p.Name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmHWM":
			peak = n * 1024
		}
	}
	return rss, peak, nil
}

// CPUSeconds is the user plus system CPU time the process has used.
func (p *Proc) CPUSeconds() (float64, error) {
	pid := p.PID()
	if pid == 0 {
		return 0, fmt.Errorf("%s is not running", p.Name)
	}
	return CPUSeconds(pid)
}

// CPUSeconds is the user plus system CPU time process pid has used.
func CPUSeconds(pid int) (float64, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	// USER_HZ is 100 on every Linux this runs on.
	return float64(st.utime+st.stime) / 100, nil
}

type procStat struct {
	comm         string
	state        string
	ppid         int
	utime, stime int64
}

// readStat parses /proc/<pid>/stat; comm may contain spaces and parentheses,
// so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("malformed stat of pid %d", pid)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("short stat of pid %d", pid)
	}
	st := procStat{comm: s[open+1 : end], state: f[0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseInt(f[11], 10, 64)
	st.stime, _ = strconv.ParseInt(f[12], 10, 64)
	return st, nil
}
