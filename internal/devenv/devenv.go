// Package devenv runs the whole of paywarden on one machine: a local control
// plane (the envtest kube-apiserver and etcd from bin/k8s), the CRDs, one
// paysim per provider type, the manager and the webhook receiver as local
// processes, and a demo namespace whose Payments tell the interesting stories
// (webhook on time, webhook lost, duplicates and reordering, declined, amount
// mismatch, unpaid, a payer who approves, a manual capture, a cancel, an
// abandoned checkout, a PayPal order PayPal deletes, Stripe with lost webhooks,
// refunds). A director plays
// the payer and the operator in those stories. `make dev` runs it for a
// person; the dev smoke test runs the same flow headless and checks every
// story's final phase.
package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/localnet"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/scheme"
)

// Namespace is where the demo objects live.
const Namespace = "demo"

// SystemNamespace is paywarden's own namespace, where the manager keeps the
// receiver's webhook verification bundles.
const SystemNamespace = "paywarden-system"

// Options shape a dev environment.
type Options struct {
	// Root is the module root (bin/k8s, config/crd and cmd/ are found from it).
	Root string
	// Dir holds the kubeconfig, binaries and logs (default <Root>/bin/dev).
	Dir string
	// TimeFactor compresses paysim's simulated delays (default 0.1).
	TimeFactor float64
	// Schedule is the demo providers' status-query schedule.
	Schedule []string
	// Pause is how long the director lets a story's cue (the payer's link, an
	// Authorized payment) be seen before it acts; 0 acts at once.
	Pause time.Duration
	// ExpiresAfter, when set, replaces the spec.expiresAfter of the stories
	// that end unpaid (40 s, long enough for a person to watch them wait);
	// the smoke test shortens it.
	ExpiresAfter time.Duration
	// OrderLifetime, when set, replaces how long the demo's PayPal keeps an
	// order nobody completed (demoOrderLifetime, 50 s), in paysim and in the
	// PayPal PaymentProvider's spec.orderLifetime; the smoke test shortens it.
	OrderLifetime time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// Env is a running dev environment.
type Env struct {
	Kubeconfig   string
	Client       client.Client
	Logs         map[string]string // process name -> log file
	ReceiverURL  string
	opts         Options
	cp           *envtest.Environment
	procs        []*process
	stopDirector context.CancelFunc
	directorDone chan struct{}
	mu           sync.Mutex
	pendingActs  []string
	sims         map[string]int // paysim port per provider name
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// signingSecrets are the demo's webhook signing secrets, shared by each paysim
// and its PaymentProvider's signing Secret.
var signingSecrets = map[string]string{
	"kukopay": "demo-kukopay-signing-secret",
	"paypal":  "demo-paypal-signing-secret",
	"generic": "whsec_ZGVtby1nZW5lcmljLXNpZ25pbmctc2VjcmV0", // base64("demo-generic-signing-secret")
	"stripe":  "whsec_demo_stripe_signing_secret",
}

// demoOrderLifetime is how long the demo's PayPal keeps an order nobody
// completed (PayPal's default is 3 hours): paysim deletes such orders after
// it, and the PayPal PaymentProvider says so in spec.orderLifetime, so the
// paypal-order-expired story ends within the demo.
const demoOrderLifetime = 50 * time.Second

var providerTypes = map[string]v1alpha1.ProviderType{
	"kukopay": v1alpha1.ProviderKukoPay, "paypal": v1alpha1.ProviderPayPal, "generic": v1alpha1.ProviderGeneric,
	"stripe": v1alpha1.ProviderStripe,
}

// Start builds the binaries, starts everything and applies the demo. On an
// error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.Dir == "" {
		opts.Dir = filepath.Join(opts.Root, "bin", "dev")
	}
	if opts.OrderLifetime <= 0 {
		opts.OrderLifetime = demoOrderLifetime
	}
	if opts.TimeFactor == 0 {
		opts.TimeFactor = 0.1
	}
	if len(opts.Schedule) == 0 {
		opts.Schedule = []string{"5s", "10s", "15s", "30s", "60s", "120s"}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	e := &Env{opts: opts, Logs: map[string]string{}}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	binDir := filepath.Join(opts.Dir, "bin")
	logDir := filepath.Join(opts.Dir, "logs")
	for _, d := range []string{binDir, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	e.logf("building manager, receiver and paysim")
	// Static and -trimpath, as the image builds them: the packages are
	// compiled once for the image, the tests and make dev.
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binDir+"/", "./cmd/manager", "./cmd/receiver", "./cmd/paysim")
	build.Dir = opts.Root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}

	assets := controlplane.Assets(opts.Root)
	e.logf("starting the control plane (kube-apiserver and etcd from %s)", assets)
	if e.cp, err = controlplane.Start(assets, controlplane.CRDs(opts.Root)); err != nil {
		return nil, err
	}
	e.Kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, e.cp.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.cp.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}

	// The manager keeps the receiver's webhook verification bundles in its
	// own namespace; both processes default to this one outside a pod.
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}); err != nil {
		return nil, err
	}

	ports, err := localnet.FreePorts(8)
	if err != nil {
		return nil, err
	}
	receiverPort, managerMetrics, managerProbes, receiverMetrics := ports[0], ports[1], ports[2], ports[3]
	e.ReceiverURL = fmt.Sprintf("http://127.0.0.1:%d", receiverPort)
	sims := map[string]int{"kukopay": ports[4], "paypal": ports[5], "generic": ports[6], "stripe": ports[7]}
	for name, port := range sims {
		args := []string{
			"--addr", fmt.Sprintf("127.0.0.1:%d", port),
			"--time-factor", strconv.FormatFloat(opts.TimeFactor, 'f', -1, 64),
			"--seed", "7",
		}
		args = append(args, "--"+name+"-webhook-secrets", signingSecrets[name])
		switch name {
		case "kukopay":
			args = append(args, "--kukopay-webhook-url", e.ReceiverURL+"/webhooks/"+Namespace+"/kukopay")
		case "paypal":
			// Every PayPal webhook is sent twice and held back behind the
			// next one: the state machine must sort it out.
			// Its orders live OrderLifetime (paysim scales the flag).
			args = append(args, "--paypal-webhook-url", e.ReceiverURL+"/webhooks/"+Namespace+"/paypal",
				"--fault-webhook-duplicate", "1", "--fault-webhook-reorder", "0.5",
				"--paypal-order-lifetime", time.Duration(float64(opts.OrderLifetime)/opts.TimeFactor).String())
		case "generic":
			// No webhook URL: every event is lost; status queries recover.
		case "stripe":
			// Every Stripe webhook is lost on the way: queries settle them.
			args = append(args, "--stripe-webhook-url", e.ReceiverURL+"/webhooks/"+Namespace+"/stripe",
				"--fault-webhook-drop", "1")
		}
		if err := e.spawn(ctx, "paysim-"+name, filepath.Join(binDir, "paysim"), args...); err != nil {
			return nil, err
		}
	}
	if err := e.spawn(ctx, "receiver", filepath.Join(binDir, "receiver"),
		"--bundle-namespace", SystemNamespace,
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", receiverPort),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", receiverMetrics)); err != nil {
		return nil, err
	}
	if err := e.spawn(ctx, "manager", filepath.Join(binDir, "manager"),
		"--bundle-namespace", SystemNamespace,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", managerMetrics),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", managerProbes)); err != nil {
		return nil, err
	}
	for name, port := range sims {
		if err := localnet.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/_paysim/counters", port), time.Minute); err != nil {
			return nil, fmt.Errorf("paysim-%s did not come up: %w (log: %s)", name, err, e.Logs["paysim-"+name])
		}
	}
	if err := localnet.WaitHTTP(ctx, e.ReceiverURL+"/readyz", time.Minute); err != nil {
		return nil, fmt.Errorf("receiver did not become ready: %w (log: %s)", err, e.Logs["receiver"])
	}
	if err := localnet.WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", managerProbes), time.Minute); err != nil {
		return nil, fmt.Errorf("manager did not become ready: %w (log: %s)", err, e.Logs["manager"])
	}

	e.logf("applying the demo namespace %q", Namespace)
	if err := e.scriptStories(ctx, sims); err != nil {
		return nil, err
	}
	if err := e.applyDemo(ctx, sims); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(context.Background())
	e.stopDirector, e.directorDone = cancel, make(chan struct{})
	go func() {
		defer close(e.directorDone)
		e.direct(dctx)
	}()
	return e, nil
}

func (e *Env) logf(format string, args ...any) {
	fmt.Fprintf(e.opts.Log, "dev: "+format+"\n", args...)
}

func (e *Env) spawn(ctx context.Context, name, bin string, args ...string) error {
	path := filepath.Join(e.opts.Dir, "logs", name+".log")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: Ctrl-C in the terminal reaches the dev program,
	// which stops the children in order, not all at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan error, 1), log: f}
	go func() { p.done <- cmd.Wait() }()
	e.procs = append(e.procs, p)
	e.Logs[name] = path
	return nil
}

// Stop stops the processes (SIGTERM, then SIGKILL after 10 s) in reverse
// order of start, then the control plane.
func (e *Env) Stop() {
	if e.stopDirector != nil {
		e.stopDirector()
		<-e.directorDone
		e.stopDirector = nil
	}
	for i := len(e.procs) - 1; i >= 0; i-- {
		p := e.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.log.Close()
	}
	e.procs = nil
	if e.cp != nil {
		_ = e.cp.Stop()
		e.cp = nil
	}
}

func (e *Env) applyDemo(ctx context.Context, sims map[string]int) error {
	c := e.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		return err
	}
	schedule := make([]metav1.Duration, len(e.opts.Schedule))
	for i, s := range e.opts.Schedule {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("schedule %q: %w", s, err)
		}
		schedule[i] = metav1.Duration{Duration: d}
	}
	for name, port := range sims {
		creds, signing := demoSecrets(name)
		prov := &v1alpha1.PaymentProvider{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
			Spec: v1alpha1.PaymentProviderSpec{
				Type:                 providerTypes[name],
				APIURL:               fmt.Sprintf("http://127.0.0.1:%d/%s", port, name),
				CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
				Webhook: v1alpha1.WebhookConfig{
					SigningSecretRef: &v1alpha1.SecretReference{Name: signing.Name},
					PayPalWebhookID:  paysim.DefaultPayPalWebhookID,
				},
				StatusQuery: v1alpha1.StatusQueryConfig{Schedule: schedule},
			},
		}
		switch name {
		case "stripe":
			// Every Stripe webhook is lost: the events-API backfill is what
			// tells paywarden a refund failed after it succeeded.
			prov.Spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: &metav1.Duration{Duration: 5 * time.Second}}
		case "paypal":
			prov.Spec.OrderLifetime = &metav1.Duration{Duration: e.opts.OrderLifetime}
		}
		for _, o := range []client.Object{creds, signing, prov} {
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("create %s: %w", o.GetName(), err)
			}
		}
	}
	for _, s := range Stories {
		p, err := s.payment()
		if err != nil {
			return err
		}
		if p.Spec.ExpiresAfter != nil && e.opts.ExpiresAfter > 0 {
			p.Spec.ExpiresAfter.Duration = e.opts.ExpiresAfter
		}
		if err := c.Create(ctx, p); err != nil {
			return fmt.Errorf("create payment %s: %w", s.Name, err)
		}
	}
	return nil
}

// Instructions is what a person needs to watch the demo.
func (e *Env) Instructions() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\npaywarden is running locally. In another terminal:\n\n")
	fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", e.Kubeconfig)
	path := filepath.Join(e.opts.Root, "bin")
	if _, err := exec.LookPath("kubectl"); err != nil {
		// No kubectl of one's own: the one `make envtest` built.
		path += string(os.PathListSeparator) + e.cp.BinaryAssetsDirectory
	}
	fmt.Fprintf(&b, "  export PATH=%s:$PATH   # kubectl paywarden, built by make dev\n", path)
	fmt.Fprintf(&b, "  kubectl paywarden stuck -A                      # what waits, and the command that acts on it\n")
	fmt.Fprintf(&b, "  kubectl paywarden why amount-mismatch -n %s    # one payment's whole story\n", Namespace)
	fmt.Fprintf(&b, "  kubectl get payments -n %s -w\n", Namespace)
	fmt.Fprintf(&b, "  kubectl get payments -n %s -o wide            # provider ids, attempts, next query, payer links\n", Namespace)
	fmt.Fprintf(&b, "  kubectl get payments -A --field-selector status.phase=Unknown\n")
	fmt.Fprintf(&b, "  kubectl describe payment -n %s amount-mismatch\n", Namespace)
	fmt.Fprintf(&b, "  kubectl get refunds -n %s\n", Namespace)
	fmt.Fprintf(&b, "  kubectl get webhookevents -n %s\n", Namespace)
	fmt.Fprintf(&b, "\nThe demo payments (what the payer and the operator do is done for you, and printed):\n")
	for _, s := range Stories {
		fmt.Fprintf(&b, "  %-21s %-8s %-53s -> %s\n", s.Name, s.Provider, s.Title, s.Expect)
		for _, a := range s.Acts {
			fmt.Fprintf(&b, "  %-30s when %s: %s\n", "", a.When.describe(), a.describe(s))
		}
	}
	fmt.Fprintf(&b, "\nLogs:\n")
	for _, name := range []string{"manager", "receiver", "paysim-kukopay", "paysim-paypal", "paysim-generic", "paysim-stripe"} {
		fmt.Fprintf(&b, "  %-15s %s\n", name, e.Logs[name])
	}
	fmt.Fprintf(&b, "\nWebhook receiver: %s/webhooks/<namespace>/<provider>\nPress Ctrl-C to stop everything.\n", e.ReceiverURL)
	return b.String()
}
