package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/stripe"
	"github.com/paywarden/paywarden/test/harness"
)

// Knobs, from the environment (make soak N=...).
const (
	defaultN = 150 // CI-sized: about two and a half minutes on two cores
	// minWindow is the shortest creation window: the API server is away
	// for a third of it from 0.26 of it, and back (a few seconds to start)
	// before the provider's outage at 0.70 of it.
	minWindow = 60 * time.Second
	// timeFactor compresses paysim's simulated time: KukoPay's 2h webhook
	// retry takes 144 s, its 30 s retry 0.6 s.
	timeFactor = 0.02
	namespace  = "soak"
	// Every provider gets the default token bucket; the rate-limit check
	// uses it.
	qps   = v1alpha1.DefaultQPS
	burst = v1alpha1.DefaultBurst
	// reapplyEvery: one in so many payments of a provider whose story ends
	// in a final phase is deleted once settled and applied again from its
	// manifest, during the chaos.
	reapplyEvery = 6
	// reapplyBefore: only payments created in the first part of the window
	// are re-applied, so that they settle while the chaos still plays.
	reapplyBefore = 0.85
	// stuckBefore: a refund stuck at the provider needs its whole status
	// query schedule before the Refund that only it prevents is created, so
	// only payments created early get that story.
	stuckBefore = 0.5
	// managers run with leader election; every kill is aimed at the leader.
	managers = 2
	// The leader election's timings: a leader killed without releasing the
	// Lease is replaced within leaseDuration + retryPeriod.
	leaseDuration, renewDeadline, retryPeriod = 6 * time.Second, 4 * time.Second, time.Second
)

// schedule is the providers' status-query schedule: short, so an "unknown"
// outcome (and a refund stuck at the provider) exhausts it within the soak
// (half a minute of answers), and still longer than any scripted decision
// (8 s after the create, or 2 s after a processing payment is rescripted).
var schedule = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}

// providers are the provider types the soak covers (paysim's modes).
var providers = []string{paysim.KukoPay, paysim.PayPal, paysim.Generic, paysim.Stripe}

// manualCapture: the providers whose payments can be captured by hand and
// canceled (the generic async-job API charges at once).
var manualCapture = map[string]bool{paysim.KukoPay: true, paysim.PayPal: true, paysim.Stripe: true}

var signing = map[string]string{
	paysim.KukoPay: "soak-kukopay-signing-secret",
	paysim.PayPal:  "soak-paypal-signing-secret",
	paysim.Generic: "whsec_c29hay1nZW5lcmljLXNpZ25pbmctc2VjcmV0", // base64("soak-generic-signing-secret")
	paysim.Stripe:  "whsec_soak_stripe_signing_secret",
}

// Story is the scripted fate of a payment.
type Story string

// The stories: what the provider decides (and, for the manual ones, what the
// merchant asks), and so what paywarden must end with.
const (
	Succeed               Story = "succeed"
	Fail                  Story = "fail"
	Expire                Story = "expire"
	Mismatch              Story = "amount mismatch"
	ProcessingThenSucceed Story = "processing, then succeed"
	Unknown               Story = "unknown"
	CaptureAll            Story = "manual capture, all"
	CapturePartial        Story = "manual capture, partial"
	CaptureAtKill         Story = "manual capture as the leader is killed"
	Cancel                Story = "cancel before capture"
	CancelRacesCapture    Story = "cancel racing a capture"
)

// stories with their weights in the mix (slots in a cycle); the manual ones
// only at providers that capture by hand.
var stories = []struct {
	story  Story
	weight int
	manual bool
}{
	{Succeed, 5, false}, {Fail, 2, false}, {Expire, 2, false}, {Mismatch, 1, false}, {ProcessingThenSucceed, 2, false}, {Unknown, 2, false},
	{CaptureAll, 2, true}, {CapturePartial, 2, true}, {CaptureAtKill, 2, true}, {Cancel, 1, true}, {CancelRacesCapture, 1, true},
}

func (s Story) manual() bool {
	for _, x := range stories {
		if x.story == s {
			return x.manual
		}
	}
	return false
}

// takesMoney: the story ends with the payer's money taken (refunds follow).
func (s Story) takesMoney() bool {
	switch s {
	case Succeed, ProcessingThenSucceed, CaptureAll, CapturePartial, CaptureAtKill:
		return true
	}
	return false
}

// planned is one payment of the workload.
type planned struct {
	Name     string
	Provider string
	Story    Story
	Delay    time.Duration // real time from create to the provider's decision
	Amount   int64
	Currency string
	// Capture is what a partial capture takes (CapturePartial).
	Capture int64
	Created time.Time // when the Payment was created (first successful create)

	// Reapply marks a payment that is deleted once settled and applied
	// again from its manifest (same name, same spec, no status). The fields
	// below are written by the re-apply loop only and read after it ended.
	Reapply bool
	// First is its first object as read just before the delete.
	First *v1alpha1.Payment
	// Deleted is when the delete was stored, Reapplied when the same
	// manifest was created again.
	Deleted, Reapplied time.Time
	// ReapplyErr says why the re-apply did not happen.
	ReapplyErr string

	// Annotated is when the capture or cancel annotation was stored
	// (written by the manual loop or the kill hook).
	Annotated time.Time
	// AtKill says what became of a capture made as its leader was killed:
	// "executed" (the call reached the provider after the manager died),
	// "lost" (it never did), or "" (it met no kill).
	AtKill string

	// Refunds is the payment's refund story (RefundPlan) and its Refunds.
	RefundPlan RefundStory
	Refunds    []*plannedRefund
	// StuckRefunds: paysim leaves this payment's refunds pending for ever.
	StuckRefunds bool
}

// received is what the payment takes from the payer (refunds are bounded by
// it).
func (p *planned) received() int64 {
	if p.Story == CapturePartial {
		return p.Capture
	}
	return p.Amount
}

// endsFinal reports whether the story ends in a final phase (not Unknown
// waiting for a human): only such payments are let go when deleted.
func (p *planned) endsFinal() bool {
	ph, _ := p.expected()
	return ph.IsFinal()
}

// manifest is the Payment as applied: spec only, no status.
func (p *planned) manifest() *v1alpha1.Payment {
	pay := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: p.Provider},
			Amount:            v1alpha1.Amount{Value: p.Amount, Currency: p.Currency},
			MerchantReference: p.Name,
			Description:       string(p.Story),
		},
	}
	if p.Story.manual() {
		pay.Spec.CaptureMethod = v1alpha1.CaptureManual
	}
	if p.Provider == paysim.Stripe && p.Story != Expire {
		// A server-side charge of a stored card, confirmed off-session: it is
		// processing until the scripted outcome applies (an asynchronous
		// debit). An expiring one is left for the payer, who never comes.
		pay.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{Customer: "cus_soak", PaymentMethod: "pm_card_soak"}
	}
	return pay
}

// expected is the phase and review reason a story must end in, before its
// refunds (a payment that took money ends Succeeded, PartiallyRefunded or
// Refunded as paysim's refunded total says). A cancel racing a capture ends
// as whichever the provider did.
func (p *planned) expected() (v1alpha1.PaymentPhase, string) {
	switch p.Story {
	case Fail:
		return v1alpha1.PhaseFailed, ""
	case Expire:
		return v1alpha1.PhaseExpired, ""
	case Mismatch:
		return v1alpha1.PhaseUnknown, v1alpha1.ReasonAmountMismatch
	case Unknown:
		return v1alpha1.PhaseUnknown, v1alpha1.ReasonRetriesExhausted
	case Cancel:
		return v1alpha1.PhaseCanceled, ""
	default:
		return v1alpha1.PhaseSucceeded, ""
	}
}

func TestSoak(t *testing.T) {
	if os.Getenv("PAYWARDEN_SOAK") == "" {
		t.Skip("the chaos soak runs with PAYWARDEN_SOAK=1 (make soak)")
	}
	n := defaultN
	if v := os.Getenv("SOAK_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2*len(providers) {
			t.Fatalf("SOAK_N=%q: want a number >= %d", v, 2*len(providers))
		}
	}
	seed := uint64(7)
	if v := os.Getenv("SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", v, err)
		}
		seed = s
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "bin", "soak", "run")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, n: n, seed: seed, dir: dir, start: time.Now(), waves: make(chan string, 8)}
	wall := s.start
	defer func() { t.Logf("soak wall time %s (set-up included)", time.Since(wall).Round(time.Second)) }()
	// The creation window: long enough for every chaos action one after
	// the other (the API server's absence ends before the provider's outage
	// starts), longer for large N (about 8 payments a second); the chaos is
	// placed in, and lasts, fractions of it.
	s.window = max(minWindow, time.Duration(n)*time.Second/8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.setUp(ctx, root)
	defer s.tearDown()
	// The chaos timeline and the workload start now.
	s.start = time.Now()
	s.run(ctx)
	s.check(ctx)
}

type soak struct {
	t      *testing.T
	n      int
	seed   uint64
	dir    string
	start  time.Time
	window time.Duration

	st       *harness.Stack
	provRec  *harness.Recorder // paywarden -> paysim: every provider call
	hookRec  *harness.Recorder // paysim -> receiver: every webhook delivery
	stopProc context.CancelFunc

	mu       sync.Mutex
	payments []*planned
	chaos    []string // what was done when
	// rescripted holds the provider payment ids of processing-then-succeed
	// payments already told to succeed.
	rescripted map[string]bool
	outage     []window // provider outages (every call answered 500)
	apiDown    []window
	// waves tells the re-apply loop to delete what has settled now: the
	// chaos sends it just before it kills the leader or stops the API
	// server, and when the API server is back (the managers restarting).
	waves chan string
	// leaders is every Lease holder seen, in order, with the manager that
	// said it led; kills the leader kills.
	leaders []leaderTerm
	kills   []kill
	// killsDone: the last leader kill is over; captures still waiting for
	// one are asked for at once.
	killsDone bool
	// gated counts what the targeted gates did (figures).
	gated gateFigures
}

type window struct{ from, to time.Time }

func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("[%6.1fs] ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.t.Log(line)
}

// background are the faults injected the whole time (rates per call or event).
// The 500s come from in front of the providers' APIs: Stripe stores its
// endpoints' own 500s under the idempotency key and replays them for the
// key's whole window (24 h), and paywarden, which can only ask again with the
// same key, waits that long (docs/soak.md).
var background = paysim.Faults{
	ServerErrorRate: 0.03, FrontServerErrors: true, TooManyRequestsRate: 0.03, RetryAfter: time.Second,
	SlowRate: 0.02, SlowDelay: 4 * time.Second, LostResponseRate: 0.03,
	DropRate: 0.1, DuplicateRate: 0.2, ReorderRate: 0.2, DelayRate: 0.1,
	WebhookDelay: 5 * time.Minute, ReorderHold: 5 * time.Minute, // simulated: 6 s real
}

func (s *soak) setUp(ctx context.Context, root string) {
	t := s.t
	var err error
	d := func(x time.Duration) string { return x.String() }
	s.st, err = harness.Start(ctx, harness.Options{
		Root: root, Dir: s.dir, Log: testLog{t},
		PaysimArgs: []string{"--time-factor", strconv.FormatFloat(timeFactor, 'f', -1, 64), "--seed", strconv.FormatUint(s.seed, 10)},
		// Verbose enough to explain a violation, quiet enough for N=1000.
		// The ledger of settled payments lives in the bundle namespace
		// (the harness creates it), and so does the leader's Lease.
		Managers: managers,
		ManagerArgs: []string{"--zap-log-level", "info", "--bundle-namespace", harness.SystemNamespace,
			"--leader-elect", "--leader-election-namespace", harness.SystemNamespace,
			"--leader-election-lease-duration", d(leaseDuration), "--leader-election-renew-deadline", d(renewDeadline),
			"--leader-election-retry-period", d(retryPeriod)},
		ReceiverArgs: []string{"--zap-log-level", "info"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.provRec, err = harness.NewRecorder(s.st.Sim.URL, false); err != nil {
		t.Fatal(err)
	}
	if s.hookRec, err = harness.NewRecorder(s.st.ReceiverURL, true); err != nil {
		t.Fatal(err)
	}
	// Which process made each provider call: the managers (one leads) and
	// the receiver (PayPal's webhook verification).
	provAddr := s.provRec.URL[len("http://"):]
	callers := append(append([]*harness.Proc(nil), s.st.Managers...), s.st.Receiver)
	s.provRec.SetOwner(func(remote string) string { return harness.SocketOwner(remote, provAddr, callers...) })
	c := s.st.CP.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range providers {
		s.createProvider(ctx, name)
		if err := s.st.Sim.SetWebhookTarget(ctx, name, s.hookRec.URL+"/webhooks/"+namespace+"/"+name, signing[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.StartReceiver(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.st.StartManagers(ctx); err != nil {
		t.Fatal(err)
	}
	// From here on they are restarted whenever they die, like pods.
	procCtx, stop := context.WithCancel(ctx)
	s.stopProc = stop
	for _, m := range s.st.Managers {
		m.Supervise(procCtx, time.Second)
	}
	s.st.Receiver.Supervise(procCtx, time.Second)
	if err := s.st.Sim.SetFaults(ctx, background); err != nil {
		t.Fatal(err)
	}
	s.logf("soak: %d payments over %s, seed %d, %d managers, logs in %s", s.n, s.window, s.seed, managers, filepath.Join(s.dir, "logs"))
}

func (s *soak) tearDown() {
	if s.stopProc != nil {
		s.stopProc()
	}
	for _, r := range []*harness.Recorder{s.provRec, s.hookRec} {
		if r != nil {
			r.Close()
		}
	}
	if s.st != nil {
		s.st.Stop()
	}
}

func (s *soak) createProvider(ctx context.Context, name string) {
	c := s.st.CP.Client
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials"},
		StringData: map[string]string{"apiKey": "sk_soak", "clientID": "soak-client", "clientSecret": "soak-secret", "token": "soak-token"}}
	if name == paysim.Stripe {
		creds.StringData = map[string]string{stripe.CredentialSecretKey: "sk_test_paysim"}
	}
	hooks := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-webhook"},
		StringData: map[string]string{"current": signing[name]}}
	q, b := int32(qps), int32(burst)
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	failures := int32(5)
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type:                 v1alpha1.ProviderType(name),
			APIURL:               s.provRec.URL + "/" + name,
			CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
			Webhook: v1alpha1.WebhookConfig{
				SigningSecretRef: &v1alpha1.SecretReference{Name: hooks.Name},
				PayPalWebhookID:  paysim.DefaultPayPalWebhookID,
			},
			StatusQuery: v1alpha1.StatusQueryConfig{QPS: &q, Burst: &b, Timeout: d(3 * time.Second)},
			Sweep:       v1alpha1.SweepConfig{Interval: d(30 * time.Second), OverdueAfter: d(30 * time.Second)},
			CircuitBreaker: v1alpha1.CircuitBreakerConfig{
				ConsecutiveFailures: &failures, OpenFor: d(10 * time.Second),
			},
		},
	}
	for _, x := range schedule {
		prov.Spec.StatusQuery.Schedule = append(prov.Spec.StatusQuery.Schedule, metav1.Duration{Duration: x})
	}
	if name != paysim.PayPal {
		// The events API recovers dropped webhooks (KukoPay, generic, Stripe;
		// PayPal's backfill is not part of the soak yet).
		prov.Spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: d(20 * time.Second), Overlap: d(2 * time.Minute)}
	}
	for _, o := range []client.Object{creds, hooks, prov} {
		if err := c.Create(ctx, o); err != nil {
			s.t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}

// run creates the workload while the chaos plays, then waits for every
// payment and refund to settle.
func (s *soak) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.createPayments(ctx) }()
	go func() { defer wg.Done(); s.playChaos(ctx) }()
	go func() { defer wg.Done(); s.reapply(ctx) }()
	loopCtx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	for _, loop := range []func(context.Context){s.rescript, s.watchLeader, s.manualActions, s.refunds} {
		loops.Add(1)
		go func() { defer loops.Done(); loop(loopCtx) }()
	}
	wg.Wait()
	s.logf("workload created and chaos over; faults off, waiting for every payment and refund to settle")
	if err := s.st.Sim.SetFaults(ctx, paysim.Faults{}); err != nil {
		s.t.Fatal(err)
	}
	s.waitSettled(ctx, 8*time.Minute)
	stopLoops()
	loops.Wait()
}

// createPayments creates the N payments evenly over the window, scripting
// each one's fate in paysim first (a rule on its merchant reference).
func (s *soak) createPayments(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.seed, 0x50a4))
	// Every provider cycles through its stories (the manual ones only where
	// it can capture by hand) and through the refund stories.
	slots := map[string][]Story{}
	for _, prov := range providers {
		for _, x := range stories {
			if x.manual && !manualCapture[prov] {
				continue
			}
			for range x.weight {
				slots[prov] = append(slots[prov], x.story)
			}
		}
		rng.Shuffle(len(slots[prov]), func(i, j int) { slots[prov][i], slots[prov][j] = slots[prov][j], slots[prov][i] })
	}
	refundSlots := refundCycle(rng)
	interval := s.window / time.Duration(s.n)
	count := map[string]int{}  // per provider, payments so far
	finals := map[string]int{} // per provider, payments so far whose story ends in a final phase
	paid := map[string]int{}   // per provider, payments so far that get refunds
	for i := range s.n {
		if d := time.Until(s.start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		prov := providers[i%len(providers)]
		story := slots[prov][count[prov]%len(slots[prov])]
		count[prov]++
		p := &planned{
			Name: fmt.Sprintf("pay-%04d", i), Provider: prov, Story: story,
			Delay:  time.Duration(1000+rng.IntN(7000)) * time.Millisecond,
			Amount: int64(500 + rng.IntN(50000)), Currency: "USD",
		}
		if story == CapturePartial {
			p.Capture = p.Amount/4 + rng.Int64N(p.Amount/2)
		}
		if p.endsFinal() {
			p.Reapply = finals[prov]%reapplyEvery == reapplyEvery/2 && float64(i) < reapplyBefore*float64(s.n)
			finals[prov]++
		}
		if story.takesMoney() && !p.Reapply {
			plan := refundSlots[paid[prov]%len(refundSlots)]
			paid[prov]++
			s.planRefunds(p, plan, float64(i) < stuckBefore*float64(s.n), rng)
		}
		sc := paysim.Script{After: simulated(p.Delay)}
		switch story {
		case Fail:
			sc.Outcome, sc.FailureCode = paysim.OutcomeFail, "card_declined"
		case Expire:
			sc.Outcome = paysim.OutcomeExpire
		case Mismatch:
			sc.Outcome = paysim.OutcomeMismatch
		case ProcessingThenSucceed:
			sc.Outcome = paysim.OutcomeProcessing
		case Unknown:
			sc.Outcome = paysim.OutcomeUnknown
		default:
			// Succeed, and the manual stories: the authorization.
			sc.Outcome = paysim.OutcomeSucceed
		}
		if p.StuckRefunds {
			sc.RefundOutcome = paysim.OutcomePending
		}
		if err := s.st.Sim.Script(ctx, paysim.Rule{Provider: p.Provider, MerchantReference: p.Name, Script: sc}); err != nil {
			s.t.Errorf("script %s: %v", p.Name, err)
			return
		}
		// The API server may be down: retry until the create is stored (an
		// AlreadyExists after a lost answer means it was).
		if !s.createRetrying(ctx, p.manifest()) {
			return
		}
		p.Created = time.Now()
		s.mu.Lock()
		s.payments = append(s.payments, p)
		s.mu.Unlock()
	}
}

// createRetrying creates obj, retrying while the API server is away; an
// AlreadyExists after a lost answer means it was stored.
func (s *soak) createRetrying(ctx context.Context, obj client.Object) bool {
	for {
		err := s.st.CP.Client.Create(ctx, obj.DeepCopyObject().(client.Object))
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func simulated(real time.Duration) time.Duration {
	return time.Duration(float64(real) / timeFactor)
}

func (s *soak) note(format string, args ...any) {
	msg := fmt.Sprintf("[%6.1fs] ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.chaos = append(s.chaos, msg)
	s.mu.Unlock()
	s.t.Log("chaos: " + msg)
}

// snapshot is the planned payments so far.
func (s *soak) snapshot() []*planned {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*planned(nil), s.payments...)
}

// rescript tells paysim to settle every processing-then-succeed payment once
// the provider shows it processing (2 s later, in real time).
func (s *soak) rescript(ctx context.Context) {
	s.mu.Lock()
	s.rescripted = map[string]bool{}
	s.mu.Unlock()
	for ctx.Err() == nil {
		want := map[string]*planned{}
		for _, p := range s.snapshot() {
			if p.Story == ProcessingThenSucceed {
				want[p.Name] = p
			}
		}
		for _, prov := range providers {
			views, err := s.st.Sim.Payments(ctx, prov)
			if err != nil {
				continue
			}
			for _, v := range views {
				s.mu.Lock()
				done := s.rescripted[v.ID]
				s.mu.Unlock()
				p := want[v.MerchantReference]
				if p == nil || done || v.State != "processing" {
					continue
				}
				// The new script replaces the whole one: a payment whose
				// refunds stay pending keeps that.
				sc := paysim.Script{Outcome: paysim.OutcomeSucceed, After: simulated(2 * time.Second)}
				if p.StuckRefunds {
					sc.RefundOutcome = paysim.OutcomePending
				}
				if err := s.st.Sim.SetOutcome(ctx, prov, v.ID, sc); err == nil {
					s.mu.Lock()
					s.rescripted[v.ID] = true
					s.mu.Unlock()
				}
			}
		}
		sleep(ctx, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// settled: a final phase, or Unknown waiting for a human.
func settled(p *v1alpha1.Payment) bool {
	return p.Status.Phase.IsFinal() || (p.Status.Phase == v1alpha1.PhaseUnknown && reviewReason(p.Status.Conditions) != "")
}

// refundSettled: a final phase, or Unknown waiting for a human.
func refundSettled(r *v1alpha1.Refund) bool {
	return r.Status.Phase.IsFinal() || (r.Status.Phase == v1alpha1.RefundUnknown && reviewReason(r.Status.Conditions) != "")
}

// waitSettled waits until every payment and refund has settled, every refund
// story has played out and every stored event is finished, then a little
// longer for late deliveries.
func (s *soak) waitSettled(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var ps v1alpha1.PaymentList
		var rs v1alpha1.RefundList
		var evs v1alpha1.WebhookEventList
		err := s.st.CP.Client.List(ctx, &ps, client.InNamespace(namespace))
		if err == nil {
			err = s.st.CP.Client.List(ctx, &rs, client.InNamespace(namespace))
		}
		if err == nil {
			err = s.st.CP.Client.List(ctx, &evs, client.InNamespace(namespace))
		}
		var open, refunds []string
		pending, stories := 0, s.refundStoriesOpen()
		if err == nil {
			for i := range ps.Items {
				if !settled(&ps.Items[i]) {
					open = append(open, ps.Items[i].Name)
				}
			}
			for i := range rs.Items {
				if !refundSettled(&rs.Items[i]) {
					refunds = append(refunds, rs.Items[i].Name)
				}
			}
			for _, e := range evs.Items {
				if !e.Status.Result.IsDone() {
					pending++
				}
			}
			if len(ps.Items) == s.n && len(open) == 0 && len(refunds) == 0 && len(stories) == 0 && pending == 0 {
				s.logf("every payment and refund settled, every refund story played, every event finished")
				time.Sleep(10 * time.Second)
				return
			}
		}
		if time.Now().After(deadline) {
			s.logf("not settled after %s: %d of %d payments open %v, Refunds open %v, refund stories unfinished %v, %d events not finished (%v)",
				timeout, len(open), s.n, open, refunds, stories, pending, err)
			return
		}
		time.Sleep(2 * time.Second)
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

func reviewReason(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type == v1alpha1.ConditionNeedsReview && c.Status == metav1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

func toJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
