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
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/test/harness"
)

// Knobs, from the environment (make soak N=...).
const (
	defaultN = 150 // CI-sized: a few minutes on two cores
	// timeFactor compresses paysim's simulated time: KukoPay's 2h webhook
	// retry takes 144 s, its 30 s retry 0.6 s.
	timeFactor = 0.02
	namespace  = "soak"
	// Every provider gets the default token bucket; the rate-limit check
	// uses it.
	qps   = v1alpha1.DefaultQPS
	burst = v1alpha1.DefaultBurst
	// reapplyEvery: one in so many payments of a provider whose story ends
	// in a final phase (succeed, fail, expire, processing-then-succeed) is
	// deleted once settled and applied again from its manifest, during the
	// chaos (15 of 150: 10 % of all payments, 17 % of those in a final phase).
	reapplyEvery = 6
	// reapplyBefore: only payments created in the first part of the window
	// are re-applied, so that they settle while the chaos still plays.
	reapplyBefore = 0.85
)

// schedule is the providers' status-query schedule: short, so an "unknown"
// outcome exhausts it within the soak (about two minutes of answers).
var schedule = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second}

// providers are the provider types the soak covers (paysim's modes).
var providers = []string{paysim.KukoPay, paysim.PayPal, paysim.Generic}

var signing = map[string]string{
	paysim.KukoPay: "soak-kukopay-signing-secret",
	paysim.PayPal:  "soak-paypal-signing-secret",
	paysim.Generic: "whsec_c29hay1nZW5lcmljLXNpZ25pbmctc2VjcmV0", // base64("soak-generic-signing-secret")
}

// Story is the scripted fate of a payment.
type Story string

// The stories: what the provider decides, and so what paywarden must end with.
const (
	Succeed               Story = "succeed"
	Fail                  Story = "fail"
	Expire                Story = "expire"
	Mismatch              Story = "amount mismatch"
	ProcessingThenSucceed Story = "processing, then succeed"
	Unknown               Story = "unknown"
)

// stories with their weights in the mix (slots in a cycle of 20).
var stories = []struct {
	story  Story
	weight int
}{{Succeed, 6}, {Fail, 3}, {Expire, 3}, {Mismatch, 2}, {ProcessingThenSucceed, 3}, {Unknown, 3}}

// planned is one payment of the workload.
type planned struct {
	Name     string
	Provider string
	Story    Story
	Delay    time.Duration // real time from create to the provider's decision
	Amount   int64
	Currency string
	Created  time.Time // when the Payment was created (first successful create)

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
}

// endsFinal reports whether the story ends in a final phase (not Unknown
// waiting for a human): only such payments are let go when deleted.
func (p *planned) endsFinal() bool {
	ph, _ := p.expected()
	return ph.IsFinal()
}

// manifest is the Payment as applied: spec only, no status.
func (p *planned) manifest() *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: p.Provider},
			Amount:            v1alpha1.Amount{Value: p.Amount, Currency: p.Currency},
			MerchantReference: p.Name,
			Description:       string(p.Story),
		},
	}
}

// expected is the phase and review reason a story must end in.
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
		if n, err = strconv.Atoi(v); err != nil || n < len(providers) {
			t.Fatalf("SOAK_N=%q: want a number >= %d", v, len(providers))
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
	root, err := testenv.ModuleRoot()
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
	// The creation window: long enough for every chaos action, longer for
	// large N (about 8 payments a second).
	s.window = max(90*time.Second, time.Duration(n)*time.Second/8)
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
	// chaos sends it just before it kills the manager or stops the API
	// server, and when the API server is back (the manager restarting).
	waves chan string
}

type window struct{ from, to time.Time }

func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("[%6.1fs] ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.t.Log(line)
}

// background are the faults injected the whole time (rates per call or event).
var background = paysim.Faults{
	ServerErrorRate: 0.03, TooManyRequestsRate: 0.03, RetryAfter: time.Second,
	SlowRate: 0.02, SlowDelay: 4 * time.Second, LostResponseRate: 0.03,
	DropRate: 0.1, DuplicateRate: 0.2, ReorderRate: 0.2, DelayRate: 0.1,
	WebhookDelay: 5 * time.Minute, ReorderHold: 5 * time.Minute, // simulated: 6 s real
}

func (s *soak) setUp(ctx context.Context, root string) {
	t := s.t
	var err error
	s.st, err = harness.Start(ctx, harness.Options{
		Root: root, Dir: s.dir, Log: testLog{t},
		PaysimArgs: []string{"--time-factor", strconv.FormatFloat(timeFactor, 'f', -1, 64), "--seed", strconv.FormatUint(s.seed, 10)},
		// Verbose enough to explain a violation, quiet enough for N=1000.
		// The ledger of settled payments lives in the bundle namespace
		// (the harness creates it); named here so the soak does not depend
		// on the default.
		ManagerArgs:  []string{"--zap-log-level", "info", "--bundle-namespace", harness.SystemNamespace},
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
	c := s.st.CP.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range providers {
		s.createProvider(ctx, name)
		if err := s.st.Sim.SetWebhook(ctx, name, s.hookRec.URL+"/webhooks/"+namespace+"/"+name, signing[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.st.StartReceiver(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.st.StartManager(ctx); err != nil {
		t.Fatal(err)
	}
	// From here on both are restarted whenever they die, like pods.
	procCtx, stop := context.WithCancel(ctx)
	s.stopProc = stop
	s.st.Manager.Supervise(procCtx, time.Second)
	s.st.Receiver.Supervise(procCtx, time.Second)
	if err := s.st.Sim.SetFaults(ctx, background); err != nil {
		t.Fatal(err)
	}
	s.logf("soak: %d payments over %s, seed %d, logs in %s", s.n, s.window, s.seed, filepath.Join(s.dir, "logs"))
}

func (s *soak) tearDown() {
	if s.stopProc != nil {
		s.stopProc()
	}
	if s.st != nil {
		s.st.Stop()
	}
	for _, r := range []*harness.Recorder{s.provRec, s.hookRec} {
		if r != nil {
			r.Close()
		}
	}
}

func (s *soak) createProvider(ctx context.Context, name string) {
	c := s.st.CP.Client
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials"},
		StringData: map[string]string{"apiKey": "sk_soak", "clientID": "soak-client", "clientSecret": "soak-secret", "token": "soak-token"}}
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
		// The events API (KukoPay, generic) recovers dropped webhooks.
		prov.Spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: d(20 * time.Second), Overlap: d(2 * time.Minute)}
	}
	for _, o := range []client.Object{creds, hooks, prov} {
		if err := c.Create(ctx, o); err != nil {
			s.t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}

// run creates the workload while the chaos plays, then waits for every
// payment to settle.
func (s *soak) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.createPayments(ctx) }()
	go func() { defer wg.Done(); s.playChaos(ctx) }()
	go func() { defer wg.Done(); s.reapply(ctx) }()
	rescriptCtx, stopRescript := context.WithCancel(ctx)
	go s.rescript(rescriptCtx)
	wg.Wait()
	s.logf("workload created and chaos over; faults off, waiting for every payment to settle")
	if err := s.st.Sim.SetFaults(ctx, paysim.Faults{}); err != nil {
		s.t.Fatal(err)
	}
	s.waitSettled(ctx, 8*time.Minute)
	stopRescript()
}

// createPayments creates the N payments evenly over the window, scripting
// each one's fate in paysim first (a rule on its merchant reference).
func (s *soak) createPayments(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.seed, 0x50a4))
	var slots []Story
	for _, x := range stories {
		for range x.weight {
			slots = append(slots, x.story)
		}
	}
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	interval := s.window / time.Duration(s.n)
	finals := map[string]int{} // per provider, payments so far whose story ends in a final phase
	for i := range s.n {
		if d := time.Until(s.start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		// Every provider cycles through every story: provider i%3, slot i/3.
		story := slots[(i/len(providers))%len(slots)]
		p := &planned{
			Name: fmt.Sprintf("pay-%04d", i), Provider: providers[i%len(providers)], Story: story,
			Delay:  time.Duration(1000+rng.IntN(7000)) * time.Millisecond,
			Amount: int64(500 + rng.IntN(50000)), Currency: "USD",
		}
		if p.endsFinal() {
			p.Reapply = finals[p.Provider]%reapplyEvery == reapplyEvery/2 && float64(i) < reapplyBefore*float64(s.n)
			finals[p.Provider]++
		}
		sc := paysim.Script{After: simulated(p.Delay)}
		switch story {
		case Succeed:
			sc.Outcome = paysim.OutcomeSucceed
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
		}
		if err := s.st.Sim.Script(ctx, paysim.Rule{Provider: p.Provider, MerchantReference: p.Name, Script: sc}); err != nil {
			s.t.Errorf("script %s: %v", p.Name, err)
			return
		}
		// The API server may be down: retry until the create is stored (an
		// AlreadyExists after a lost answer means it was).
		for {
			err := s.st.CP.Client.Create(ctx, p.manifest())
			if err == nil || isAlreadyExists(err) {
				break
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		p.Created = time.Now()
		s.mu.Lock()
		s.payments = append(s.payments, p)
		s.mu.Unlock()
	}
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// reapply deletes the payments marked Reapply that have settled in a final
// phase and, once an object is gone (remembered in the ledger, the finalizer
// removed), creates it again from the same manifest: what a GitOps re-sync or
// a person does after a delete. Deletes come in waves, each just before a
// chaos action that concerns them (a kill of the manager, the API server
// stopped, the API server back with the manager restarting) so that deletes,
// ledger writes, re-creates and adoptions meet them; after the last wave
// (the manager's kill at the end of the window) every candidate is deleted
// as soon as it has settled. A re-apply counts as done once the create was
// stored.
func (s *soak) reapply(ctx context.Context) {
	c := s.st.CP.Client
	deadline := s.start.Add(s.window + 90*time.Second)
	deleting := false // a wave is on: delete what has settled
	lastWave := s.start.Add(s.window - time.Second)
	for ctx.Err() == nil {
		s.mu.Lock()
		all := len(s.payments) == s.n
		var todo []*planned
		for _, p := range s.payments {
			if p.Reapply && p.Reapplied.IsZero() && p.ReapplyErr == "" {
				todo = append(todo, p)
			}
		}
		s.mu.Unlock()
		if all && len(todo) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range todo {
				p.ReapplyErr = fmt.Sprintf("not re-applied by %s (deleted: %v)", deadline.Sub(s.start).Round(time.Second), !p.Deleted.IsZero())
			}
			s.logf("re-apply: %d payments not re-applied before the deadline", len(todo))
			return
		}
		for _, p := range todo {
			key := client.ObjectKey{Namespace: namespace, Name: p.Name}
			obj := &v1alpha1.Payment{}
			err := c.Get(ctx, key, obj)
			if p.Deleted.IsZero() {
				if !deleting && time.Now().Before(lastWave) {
					continue
				}
				switch {
				case err == nil && obj.DeletionTimestamp != nil:
					// The delete was stored and its answer lost.
				case err == nil:
					if !payment.Settled(obj) {
						continue
					}
					p.First = obj.DeepCopy()
					uid := obj.UID
					if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
						continue // the API server may be away: again next round
					}
				case apierrors.IsNotFound(err) && p.First != nil:
					// Deleted and already let go; the answer was lost.
				default:
					continue
				}
				p.Deleted = time.Now()
				s.logf("re-apply: deleted %s (%s, %s, provider id %s)", p.Name, p.Provider, p.First.Status.Phase, p.First.Status.ProviderPaymentID)
				continue
			}
			if !apierrors.IsNotFound(err) {
				continue // still held by its finalizer, or the API server is away
			}
			if err := c.Create(ctx, p.manifest()); err != nil && !isAlreadyExists(err) {
				continue
			}
			p.Reapplied = time.Now()
			s.logf("re-apply: %s applied again from its manifest, %.1fs after its delete", p.Name, p.Reapplied.Sub(p.Deleted).Seconds())
		}
		deleting = false
		select {
		case <-ctx.Done():
		case why := <-s.waves:
			s.logf("re-apply: deleting the settled ones now (%s)", why)
			deleting = true
		case <-time.After(time.Second):
		}
	}
}

func simulated(real time.Duration) time.Duration {
	return time.Duration(float64(real) / timeFactor)
}

// playChaos runs the chaos timeline, scaled to the window: kills while
// payments are being created and settled, the API server away for 30 s, a
// provider outage with kills in the middle of it, and kills at the end.
func (s *soak) playChaos(ctx context.Context) {
	at := func(frac float64) {
		if d := time.Until(s.start.Add(time.Duration(frac * float64(s.window)))); d > 0 {
			time.Sleep(d)
		}
	}
	kill := func(procs ...*harness.Proc) {
		for _, p := range procs {
			// A process in a crash loop (its API server was away) is killed
			// once it runs again.
			for i := 0; i < 100 && p.PID() == 0; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			pid := p.PID()
			if err := p.Kill(); err != nil {
				s.t.Errorf("kill %s: %v", p.Name, err)
			}
			s.note("kill -9 %s (pid %d); its supervisor restarts it after 1s", p.Name, pid)
		}
	}
	// wave lets the re-apply loop delete its settled payments half a second
	// before the chaos action at frac.
	wave := func(frac float64, why string) {
		at(frac - 0.5/s.window.Seconds())
		select {
		case s.waves <- why:
		default:
		}
		at(frac)
	}
	wave(0.08, "manager kill in 0.5s")
	kill(s.st.Manager)
	at(0.16)
	kill(s.st.Receiver)
	wave(0.22, "kube-apiserver stop in 0.5s")
	s.note("kube-apiserver stopped for 30s (etcd keeps running)")
	from := time.Now()
	if err := s.st.CP.RestartAPIServer(ctx, 30*time.Second); err != nil {
		s.t.Errorf("restart kube-apiserver: %v", err)
	} else {
		s.note("kube-apiserver ready again, %s after it was stopped", time.Since(from).Round(100*time.Millisecond))
		s.waves <- "kube-apiserver back, the manager restarting"
	}
	s.mu.Lock()
	s.apiDown = append(s.apiDown, window{from, time.Now()})
	s.mu.Unlock()
	at(0.65)
	s.note("provider outage: every API call answered 500 for 20s")
	out := background
	out.ServerErrorRate, out.TooManyRequestsRate, out.LostResponseRate, out.SlowRate = 1, 0, 0, 0
	from = time.Now()
	if err := s.st.Sim.SetFaults(ctx, out); err != nil {
		s.t.Error(err)
	}
	time.Sleep(4500 * time.Millisecond)
	select {
	case s.waves <- "manager and receiver kill in 0.5s":
	default:
	}
	time.Sleep(500 * time.Millisecond)
	kill(s.st.Manager, s.st.Receiver)
	time.Sleep(15 * time.Second)
	if err := s.st.Sim.SetFaults(ctx, background); err != nil {
		s.t.Error(err)
	}
	s.mu.Lock()
	s.outage = append(s.outage, window{from, time.Now()})
	s.mu.Unlock()
	s.note("provider outage over")
	at(0.90)
	kill(s.st.Receiver)
	wave(1.00, "manager kill in 0.5s; from now on as soon as they settle")
	kill(s.st.Manager)
	time.Sleep(10 * time.Second)
}

func (s *soak) note(format string, args ...any) {
	msg := fmt.Sprintf("[%6.1fs] ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.chaos = append(s.chaos, msg)
	s.mu.Unlock()
	s.t.Log("chaos: " + msg)
}

// rescript tells paysim to settle every processing-then-succeed payment once
// the provider shows it processing (2 s later, in real time).
func (s *soak) rescript(ctx context.Context) {
	s.mu.Lock()
	s.rescripted = map[string]bool{}
	s.mu.Unlock()
	for ctx.Err() == nil {
		s.mu.Lock()
		want := map[string]bool{}
		for _, p := range s.payments {
			if p.Story == ProcessingThenSucceed {
				want[p.Name] = true
			}
		}
		s.mu.Unlock()
		for _, prov := range providers {
			views, err := s.st.Sim.Payments(ctx, prov)
			if err != nil {
				continue
			}
			for _, v := range views {
				s.mu.Lock()
				done := s.rescripted[v.ID]
				s.mu.Unlock()
				if !want[v.MerchantReference] || done || v.State != "processing" {
					continue
				}
				if err := s.st.Sim.SetOutcome(ctx, prov, v.ID, paysim.Script{Outcome: paysim.OutcomeSucceed, After: simulated(2 * time.Second)}); err == nil {
					s.mu.Lock()
					s.rescripted[v.ID] = true
					s.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// settled: a final phase, or Unknown waiting for a human.
func settled(p *v1alpha1.Payment) bool {
	return p.Status.Phase.IsFinal() || (p.Status.Phase == v1alpha1.PhaseUnknown && reviewReason(p) != "")
}

// waitSettled waits until every payment has settled and every stored event
// is finished, then a little longer for late deliveries.
func (s *soak) waitSettled(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var ps v1alpha1.PaymentList
		var evs v1alpha1.WebhookEventList
		err := s.st.CP.Client.List(ctx, &ps, client.InNamespace(namespace))
		if err == nil {
			err = s.st.CP.Client.List(ctx, &evs, client.InNamespace(namespace))
		}
		open, pending := 0, 0
		if err == nil {
			for i := range ps.Items {
				if !settled(&ps.Items[i]) {
					open++
				}
			}
			for _, e := range evs.Items {
				if !e.Status.Result.IsDone() {
					pending++
				}
			}
			if len(ps.Items) == s.n && open == 0 && pending == 0 {
				s.logf("every payment settled, every event finished")
				time.Sleep(10 * time.Second)
				return
			}
		}
		if time.Now().After(deadline) {
			s.logf("not settled after %s: %d of %d payments open, %d events not finished (%v)", timeout, open, s.n, pending, err)
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

func reviewReason(p *v1alpha1.Payment) string {
	for _, c := range p.Status.Conditions {
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
