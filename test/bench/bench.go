// Package bench is paywarden's end-to-end benchmark (`make bench`): one run
// on one local API server, the manager and the webhook receiver as separate
// processes (built from any source tree), paysim as the provider. It reports
// every figure as a ratio with its parts:
//
//   - the receiver against a bare client doing the same two API writes per
//     event (closed loop at several sender counts, then an open loop at half
//     the bare ceiling, p99 against p99);
//   - duplicate deliveries: ack latency and API requests per duplicate;
//   - the manager: RSS with 1k and 10k payments in flight, reconciles and CPU
//     per provider call while a 10k backlog drains through a qps 50 / burst
//     100 token bucket;
//   - the happy path, webhook first and query first: provider calls and API
//     writes per payment;
//   - storage: bytes per object as etcd holds them;
//   - the gateway's priorities: how long a new payment's create waits for
//     its provider's token while 2000 status queries are due (in process,
//     through the gateway with the real token bucket and clock).
//
// docs/performance.md explains how to read the table.
package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/paywarden/paywarden/test/harness"
)

// Options shape a run.
type Options struct {
	// Root is this module's root (paysim and the harness come from it).
	Root string
	// Src is the source tree whose manager and receiver are measured
	// (default Root).
	Src string
	// Dir holds binaries, logs and the kubeconfig.
	Dir string
	// Assets holds kube-apiserver and etcd.
	Assets string
	// Senders are the closed-loop concurrency levels (default 1, 8, 32).
	Senders []int
	// Events is the number of new events per closed-loop run (default 1000).
	Events int
	// OpenSeconds is the length of the open-loop runs (default 20).
	OpenSeconds float64
	// Happy is the number of payments per happy-path case (default 100).
	Happy int
	// InFlightSmall and InFlightLarge are the manager's in-flight payment
	// counts for the RSS figures; the large one is also the backlog (default
	// 1000 and 10000).
	InFlightSmall, InFlightLarge int
	// BacklogQPS and BacklogBurst are the backlog provider's token bucket
	// (default 50 and 100).
	BacklogQPS, BacklogBurst int32
	// Retained, when positive, adds a phase measuring the manager's RSS with
	// that many settled Payments and finished WebhookEvents (off by default:
	// it takes minutes; docs/capacity.md uses it).
	Retained int
	// Only, when set, names the one phase to run (receiver, happy,
	// manager, retained, priorities).
	Only string
	// Log receives progress lines.
	Log io.Writer
}

func (o *Options) defaults() {
	if o.Src == "" {
		o.Src = o.Root
	}
	if len(o.Senders) == 0 {
		o.Senders = []int{1, 8, 32}
	}
	o.Events = positiveOr(o.Events, 1000)
	o.OpenSeconds = positiveOr(o.OpenSeconds, 20)
	o.Happy = positiveOr(o.Happy, 100)
	o.InFlightSmall = positiveOr(o.InFlightSmall, 1000)
	o.InFlightLarge = positiveOr(o.InFlightLarge, 10000)
	o.BacklogQPS = positiveOr(o.BacklogQPS, 50)
	o.BacklogBurst = positiveOr(o.BacklogBurst, 100)
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// positiveOr returns v, or def when v is not positive (an option left unset).
func positiveOr[T int | int32 | float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Results is everything one run measured; it is also the JSON file.
type Results struct {
	Source   string    `json:"source"`
	Commit   string    `json:"commit"`
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	CPUs     int       `json:"cpus"`

	Throughput []Throughput `json:"throughput"`
	OpenLoop   OpenLoop     `json:"openLoop"`
	Duplicates Duplicates   `json:"duplicates"`
	HappyPath  []HappyPath  `json:"happyPath"`
	Manager    Manager      `json:"manager"`
	Storage    Storage      `json:"storage"`
	CreateWait CreateWait   `json:"createWait"`
	Targets    []Target     `json:"targets"`
	// Phases are the phases measured, in order (-only runs one).
	Phases []string `json:"phases,omitempty"`
}

// Ran reports whether r measured phase; results that do not list their
// phases (written before the list was kept) measured every one.
func (r *Results) Ran(phase string) bool {
	return len(r.Phases) == 0 || slices.Contains(r.Phases, phase)
}

// Throughput compares accepted new events per second at one concurrency.
type Throughput struct {
	Senders        int     `json:"senders"`
	Events         int     `json:"events"`
	ReceiverPerSec float64 `json:"receiverPerSec"`
	// ReceiverSustainedPerSec counts until the receiver's last API request
	// of the run (its writes after the answers included).
	ReceiverSustainedPerSec float64 `json:"receiverSustainedPerSec"`
	BarePerSec              float64 `json:"barePerSec"`
	Ratio                   float64 `json:"ratio"`
	ReceiverP50Ms           float64 `json:"receiverP50Ms"`
	ReceiverP99Ms           float64 `json:"receiverP99Ms"`
	BareP50Ms               float64 `json:"bareP50Ms"`
	BareP99Ms               float64 `json:"bareP99Ms"`
	Errors                  int     `json:"errors"`
	FirstError              string  `json:"firstError,omitempty"`
	// CPU milliseconds per event by process (apiserver, etcd, receiver,
	// bench), the receiver's asynchronous writes included.
	ReceiverCPUMs map[string]float64 `json:"receiverCPUMs"`
	BareCPUMs     map[string]float64 `json:"bareCPUMs"`
	// Full is a bare client making all four writes the receiver makes per
	// new event (the two above, the Kubernetes Event and the result).
	FullPerSec float64 `json:"fullPerSec"`
	FullP99Ms  float64 `json:"fullP99Ms"`
	FullRatio  float64 `json:"fullRatio"`
}

// OpenLoop compares latency at a fixed arrival rate.
type OpenLoop struct {
	RatePerSec    float64 `json:"ratePerSec"`
	Events        int     `json:"events"`
	ReceiverP50Ms float64 `json:"receiverP50Ms"`
	ReceiverP99Ms float64 `json:"receiverP99Ms"`
	BareP50Ms     float64 `json:"bareP50Ms"`
	BareP99Ms     float64 `json:"bareP99Ms"`
	Ratio         float64 `json:"ratio"`
	// SameWrites: a client making the receiver's four writes and answering
	// after the first two, as the receiver does (the other two follow in
	// the background); SameWritesRatio is receiver p99 / its p99.
	SameWritesP50Ms float64 `json:"sameWritesP50Ms"`
	SameWritesP99Ms float64 `json:"sameWritesP99Ms"`
	SameWritesRatio float64 `json:"sameWritesRatio"`
	Errors          int     `json:"errors"`
}

// Duplicates measures redeliveries of events the receiver stored recently.
type Duplicates struct {
	Events  int     `json:"events"`
	Senders int     `json:"senders"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	// ReceiverRequests is the receiver's own count (rest_client_requests_total);
	// APIServerRequests counts payments and webhookevents requests at the
	// API server.
	ReceiverRequests        float64 `json:"receiverRequests"`
	APIServerRequests       float64 `json:"apiServerRequests"`
	RequestsPerDuplicate    float64 `json:"requestsPerDuplicate"`
	APIRequestsPerDuplicate float64 `json:"apiRequestsPerDuplicate"`
	Errors                  int     `json:"errors"`
}

// HappyPath is what settling one payment costs.
type HappyPath struct {
	Case     string `json:"case"`
	Payments int    `json:"payments"`
	// Provider calls per payment, from paysim's counters.
	CallsPerPayment   float64 `json:"callsPerPayment"`
	CreatesPerPayment float64 `json:"createsPerPayment"`
	QueriesPerPayment float64 `json:"queriesPerPayment"`
	// API writes per payment at the API server: Payment status, and every
	// write of any kind (WebhookEvents and Kubernetes Events included, the
	// benchmark's own Payment creates excluded).
	StatusWritesPerPayment float64 `json:"statusWritesPerPayment"`
	WritesPerPayment       float64 `json:"writesPerPayment"`
	EventWritesPerPayment  float64 `json:"webhookEventWritesPerPayment"`
	KubeEventsPerPayment   float64 `json:"kubeEventsPerPayment"`
	SettleP50Ms            float64 `json:"settleP50Ms"`
	SettleP99Ms            float64 `json:"settleP99Ms"`
}

// Manager is the manager's memory and the cost of draining a backlog.
type Manager struct {
	InFlightSmall int     `json:"inFlightSmall"`
	RSSSmallMiB   float64 `json:"rssSmallMiB"`
	PeakSmallMiB  float64 `json:"peakSmallMiB"`
	InFlightLarge int     `json:"inFlightLarge"`
	RSSLargeMiB   float64 `json:"rssLargeMiB"`
	PeakLargeMiB  float64 `json:"peakLargeMiB"`
	BacklogQPS    int32   `json:"backlogQPS"`
	BacklogBurst  int32   `json:"backlogBurst"`
	Reconciles    float64 `json:"reconciles"`
	ProviderCalls int     `json:"providerCalls"`
	PerCall       float64 `json:"reconcilesPerCall"`
	PerCallNoInit float64 `json:"reconcilesPerCallAfterInitialList"`
	CPUSeconds    float64 `json:"cpuSeconds"`
	CPUPerCallMs  float64 `json:"cpuMsPerCall"`
	DrainSeconds  float64 `json:"drainSeconds"`
	IdealSeconds  float64 `json:"idealDrainSeconds"`
	ListSeconds   float64 `json:"listSeconds"`
	ListMiB       float64 `json:"listMiB"`
	EtcdGrowthMiB float64 `json:"etcdGrowthMiB"`
	// The retained phase (-retained).
	Retained               int     `json:"retained,omitempty"`
	RSSEmptyMiB            float64 `json:"rssEmptyMiB,omitempty"`
	RSSRetainedPaymentsMiB float64 `json:"rssRetainedPaymentsMiB,omitempty"`
	RSSRetainedBothMiB     float64 `json:"rssRetainedPaymentsAndEventsMiB,omitempty"`
	KiBPerRetainedPayment  float64 `json:"kibPerRetainedPayment,omitempty"`
	KiBPerRetainedEvent    float64 `json:"kibPerRetainedWebhookEvent,omitempty"`
	// With the settled payments and RetainedInFlight in flight (the
	// capacity target), and the Go heap in use at both fill points.
	RetainedInFlight        int     `json:"retainedInFlight,omitempty"`
	RSSRetainedInFlightMiB  float64 `json:"rssRetainedAndInFlightMiB,omitempty"`
	HeapRetainedPaymentsMiB float64 `json:"heapRetainedPaymentsMiB,omitempty"`
	HeapRetainedInFlightMiB float64 `json:"heapRetainedAndInFlightMiB,omitempty"`
}

// Storage is bytes per object as the API server returns it from etcd (JSON,
// managed fields included: what etcd stores for a custom resource).
type Storage struct {
	PaymentSettled     int     `json:"paymentSettledBytes"`
	PaymentFullHistory int     `json:"paymentFullHistoryBytes"`
	PaymentInFlight    int     `json:"paymentInFlightBytes"`
	WebhookEvent       int     `json:"webhookEventBytes"`
	EtcdPerPayment     float64 `json:"etcdBytesPerNewPayment"`
}

// Target is one goal checked against a figure.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

// Run measures the tree opts.Src.
func Run(ctx context.Context, opts Options) (*Results, error) {
	opts.defaults()
	switch opts.Only {
	case "", "receiver", "happy", "manager", "priorities":
	case "retained":
		if opts.Retained <= 0 {
			return nil, fmt.Errorf("-only retained needs -retained N (the settled Payments to keep)")
		}
	default:
		return nil, fmt.Errorf("unknown phase %q: want receiver, happy, manager, retained or priorities", opts.Only)
	}
	res := &Results{Source: opts.Src, Commit: commit(opts.Src), Started: time.Now(), CPUs: runtime.NumCPU()}
	st, err := startStack(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer st.Stop()
	b := &bench{st: st, opts: opts, res: res}
	for _, phase := range []struct {
		key, name string
		run       func(context.Context) error
	}{
		{"receiver", "receiver against a bare client", b.receiver},
		{"happy", "happy path", b.happyPath},
		{"manager", "manager memory and backlog", b.manager},
		{"retained", "manager memory with retained objects", b.retained},
		{"priorities", "gateway priorities", b.priorities},
	} {
		if phase.key == "retained" && opts.Retained <= 0 || opts.Only != "" && phase.key != opts.Only {
			continue
		}
		b.logf("phase: %s", phase.name)
		res.Phases = append(res.Phases, phase.key)
		if err := phase.run(ctx); err != nil {
			return res, fmt.Errorf("%s: %w (logs in %s/logs)", phase.name, err, opts.Dir)
		}
	}
	if opts.Only == "" {
		res.Targets = targets(res)
	}
	res.Duration = time.Since(res.Started).Round(time.Second).String()
	return res, nil
}

func startStack(ctx context.Context, opts Options) (*harness.Stack, error) {
	return harness.Start(ctx, harness.Options{
		Root: opts.Root, Src: opts.Src, Dir: opts.Dir, Assets: opts.Assets, Log: opts.Log,
		PaysimArgs: []string{"--time-factor", "1", "--default-outcome", "pending", "--kukopay-webhook-secrets", signingSecret},
	})
}

type bench struct {
	st   *harness.Stack
	opts Options
	res  *Results
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.opts.Log, "bench: "+format+"\n", args...)
}

func commit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}

func targets(r *Results) []Target {
	var ts []Target
	// The receiver against a client making the same API writes (issue 12);
	// the two-write bare client is reported beside it, as the cost of what
	// the receiver must record.
	for _, t := range r.Throughput {
		ts = append(ts, Target{Name: fmt.Sprintf("new events/s vs the same writes, %d senders", t.Senders), Value: t.FullRatio, Goal: ">= 0.9", Met: t.FullRatio >= 0.9})
	}
	ts = append(ts,
		Target{Name: "open-loop p99 vs the same writes", Value: r.OpenLoop.SameWritesRatio, Goal: "<= 1.5", Met: r.OpenLoop.SameWritesRatio > 0 && r.OpenLoop.SameWritesRatio <= 1.5},
		Target{Name: "API requests per recent duplicate", Value: r.Duplicates.RequestsPerDuplicate, Goal: "0", Met: r.Duplicates.RequestsPerDuplicate == 0},
		Target{Name: "reconciles per provider call after the initial list", Value: r.Manager.PerCallNoInit, Goal: "<= ~1 (1.1)", Met: r.Manager.PerCallNoInit <= 1.1},
		Target{Name: "create wait (ms) behind due queries, p50", Value: r.CreateWait.P50Ms, Goal: "<= one token interval",
			Met: r.CreateWait.TokenIntervalMs > 0 && r.CreateWait.P50Ms <= r.CreateWait.TokenIntervalMs},
	)
	return ts
}
