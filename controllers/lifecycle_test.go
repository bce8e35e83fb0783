package controllers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/test/harness"
)

// Issue 13: the checkout lifecycle (SPEC §11.5) end to end, against paysim
// over HTTP with the manager controllers.Setup wires. paysim's payers wait
// until the test approves (the approve control call), so each step is the
// test's to take.

// payerSchedule is a status-query schedule that is still running when the
// payer approves (the test approves as soon as it sees the payer's link),
// with a short last step: a Manual payment waiting for its capture is looked
// at on the last step, which is how an authorization's expiry is noticed.
var payerSchedule = []string{"200ms", "200ms", "200ms", "200ms", "200ms", "500ms", "1s", "2s", "5s", "300ms"}

// payersWait scripts every new payment of provider at s to wait for the
// payer's approval (the approve control call); authorizations last period
// (simulated; 0: the provider's).
func payersWait(t *testing.T, s *fixture.Sim, provider string, period time.Duration) {
	t.Helper()
	if err := s.Script(paysim.Rule{Provider: provider, Script: paysim.Script{Outcome: paysim.OutcomeAbandon, AuthorizationPeriod: period}}); err != nil {
		t.Fatal(err)
	}
}

// startPayPal runs paysim of opts with payers who wait for the test's
// approve call, and a PayPal provider in a new namespace whose status
// queries follow schedule.
func startPayPal(t *testing.T, opts paysim.Options, namespace string, schedule []string) (*fixture.Sim, *v1alpha1.PaymentProvider) {
	t.Helper()
	s := fixture.StartSim(t, opts)
	payersWait(t, s, paysim.PayPal, 0)
	ns := fixture.Namespace(t, env.Client, namespace)
	return s, fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Schedule: schedule})
}

// awaitPayer waits until p waits for its payer (status.customerAction) and
// returns it.
func awaitPayer(t *testing.T, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	return fixture.WaitPayment(t, env.Client, p, "to wait for the payer", func(p *v1alpha1.Payment) bool {
		return p.Status.CustomerAction != nil && p.Status.ProviderPaymentID != ""
	})
}

// approve is the payer approving p at paysim; it returns the provider's id.
func approve(t *testing.T, s *fixture.Sim, typ v1alpha1.ProviderType, p *v1alpha1.Payment) string {
	t.Helper()
	id := awaitPayer(t, p).Status.ProviderPaymentID
	if err := s.Approve(string(typ), id); err != nil {
		t.Fatal(err)
	}
	return id
}

// awaitAuthorized waits until the Manual payment p is Authorized and waits
// for the merchant's capture.
func awaitAuthorized(t *testing.T, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	got := fixture.WaitPayment(t, env.Client, p, "to be Authorized, waiting for its capture", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase == v1alpha1.PhaseAuthorized && p.Status.WaitingFor == "Capture" && p.Status.Operation == nil
	})
	if a := got.Status.AmountAuthorized; a == nil || a.Value != p.Spec.Amount.Value || a.Currency != p.Spec.Amount.Currency {
		t.Errorf("%s: amountAuthorized %+v, want the spec's %d %s", p.Name, a, p.Spec.Amount.Value, p.Spec.Amount.Currency)
	}
	if got.Status.AuthorizationExpiresAt == nil {
		t.Errorf("%s: authorizationExpiresAt not recorded", p.Name)
	}
	return got
}

// onPayment picks the calls about one provider payment (its order, and its
// authorization once there is one).
func onPayment(s *fixture.Sim, typ v1alpha1.ProviderType, id string) func(fixture.Call) bool {
	return func(c fixture.Call) bool {
		if strings.Contains(c.Path, "/"+id) {
			return true
		}
		v, ok := s.Payment(string(typ), id)
		return ok && v.Authorization != nil && strings.Contains(c.Path, "/"+v.Authorization.ID+"/")
	}
}

func both(a, b func(fixture.Call) bool) func(fixture.Call) bool {
	return func(c fixture.Call) bool { return a(c) && b(c) }
}

// wantHistoryTo checks the change of p to phase: its channel and, when
// reason is not empty, that its reason starts with it.
func wantHistoryTo(t *testing.T, p *v1alpha1.Payment, phase v1alpha1.PaymentPhase, source v1alpha1.ObservationSource, reason string) {
	t.Helper()
	h, err := fixture.HistoryTo(p, phase)
	if err != nil {
		t.Error(err)
		return
	}
	if h.Source != source || !strings.HasPrefix(h.Reason, reason) {
		t.Errorf("%s: the change to %s is %+v; want it via %s with reason %q", p.Name, phase, h, source, reason)
	}
}

func wantNoReview(t *testing.T, p *v1alpha1.Payment) {
	t.Helper()
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("%s needs review: %+v", p.Name, c)
	}
}

// TestPayPalApprovalByWebhookIsCapturedOnce: a PayPal order (Automatic)
// waits for its payer, whose link is in status.customerAction (one
// CustomerActionRequired Event); the payer approves, paysim delivers
// CHECKOUT.ORDER.APPROVED through the receiver, and that webhook alone (no
// status query is due for an hour) makes the manager capture: once. It also
// measures what one such payment costs in provider calls and status writes.
func TestPayPalApprovalByWebhookIsCapturedOnce(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{})
	payersWait(t, s, paysim.PayPal, 0)
	ns := fixture.Namespace(t, env.Client, "checkout")
	prov := fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Quiet: true})
	receiverWrites := &fixture.Writes{}
	rcv := fixture.StartReceiver(t, env, fixture.ReceiverOptions{WrapClient: receiverWrites.Wrap})
	fixture.DeliverWebhooks(t, s, rcv, prov)
	// paysim sends PAYMENT.CAPTURE.COMPLETED as soon as it has captured; on
	// a busy machine the receiver could apply it before the manager stores
	// the capture's own answer. It is held back until the payment is
	// Succeeded, so the answer is what settles it.
	hop, err := harness.NewRecorder(rcv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hop.Close)
	captured := hop.Hold(func(_ *http.Request, body []byte) bool {
		return strings.Contains(string(body), "PAYMENT.CAPTURE.COMPLETED")
	}, fixture.Timeout)
	if err := s.SetWebhookTarget(paysim.PayPal, hop.URL+"/webhooks/"+ns+"/"+prov.Name); err != nil {
		t.Fatal(err)
	}
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment:       fixture.Payment{Namespace: ns, Name: "by-webhook", Provider: prov.Name},
		CaptureMethod: v1alpha1.CaptureAutomatic,
	})

	waiting := awaitPayer(t, p)
	id := waiting.Status.ProviderPaymentID
	if waiting.Status.Phase != v1alpha1.PhasePending || waiting.Status.WaitingFor != "Payer" {
		t.Errorf("waiting for the payer: phase %s, waitingFor %q; want Pending, Payer", waiting.Status.Phase, waiting.Status.WaitingFor)
	}
	if u := waiting.Status.CustomerAction.URL; u != s.Payments(paysim.PayPal)[0].ActionURL || !strings.Contains(u, "token="+id) {
		t.Errorf("customerAction %q, want paysim's approve link of order %s", u, id)
	}
	m.Events.Wait(t, corev1.EventTypeNormal, "CustomerActionRequired")
	if err := s.Approve(paysim.PayPal, id); err != nil {
		t.Fatal(err)
	}

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	captured.Release(true)
	approved := fixture.SimEvent(t, s, v1alpha1.ProviderPayPal, id)
	if approved.Type != "CHECKOUT.ORDER.APPROVED" {
		t.Fatalf("paysim's first event of %s is %s", id, approved.Type)
	}
	wantHistoryTo(t, got, v1alpha1.PhaseProcessing, v1alpha1.SourceWebhook, "approved by the payer")
	wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, v1alpha1.SourceCapture, "")
	if r := got.Status.AmountReceived; r == nil || r.Value != 1999 || r.Currency != "USD" {
		t.Errorf("amountReceived %+v, want 1999 USD", r)
	}
	if got.Status.CustomerAction != nil || got.Status.WaitingFor != "" || got.Status.Operation != nil {
		t.Errorf("a captured payment keeps customerAction %+v, waitingFor %q, operation %+v", got.Status.CustomerAction, got.Status.WaitingFor, got.Status.Operation)
	}
	wantNoReview(t, got)

	// Both of paysim's events (the approval, then the capture's
	// PAYMENT.CAPTURE.COMPLETED) are received and done with.
	fixture.Eventually(t, fixture.Timeout, "both events to be done", func() (bool, string) {
		evs := fixture.WebhookEvents(t, env.Client, ns)
		done := 0
		for _, e := range evs {
			if e.Status.Result.IsDone() {
				done++
			}
		}
		return len(s.Events(paysim.PayPal)) == 2 && done == 2, fixture.Dump(evs)
	})
	if e := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, approved.ID); e == nil || e.Status.Result != v1alpha1.ResultApplied {
		t.Errorf("the approval's WebhookEvent: %s", fixture.Dump(e))
	}

	c := s.Counters()
	if c.CapturesByPayment[id] != 1 || c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)] != 1 {
		t.Errorf("captures of %s: %d taking effect, %d calls; want exactly 1 and 1", id, c.CapturesByPayment[id], c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)])
	}
	// The manager's calls: the token, the create, and the capture (which
	// reads the order first to know what to call). No status query.
	calls := m.Requests.Calls(nil)
	if k := fixture.Kinds(calls); k != "token create get capture" {
		t.Errorf("the manager's provider calls: %s; want token create get capture", k)
	}
	if n := len(m.Events.About(p.Name, "CustomerActionRequired")); n != 1 {
		t.Errorf("%d CustomerActionRequired Events, want 1", n)
	}
	t.Logf("measured, one PayPal payment approved by webhook and captured: manager calls [%s] (%d); paysim: %d tokens issued (manager and receiver), %d creates, %d order reads, %d capture calls, %d verify calls; Payment status writes: %d by the manager, %d by the receiver; WebhookEvents %s",
		fixture.Kinds(calls), len(calls), c.TokensIssued, c.CreateRequests, c.QueriesByPayment[id], c.ActionRequests, c.VerifyCalls,
		m.Writes.Status(p), receiverWrites.Status(p), eventResults(fixture.WebhookEvents(t, env.Client, ns)))
}

func eventResults(evs []v1alpha1.WebhookEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Spec.Type+"="+string(e.Status.Result))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestPayPalApprovalByStatusQueryIsCapturedOnce: every webhook is dropped;
// the payer's approval is learned by a status query, and the capture that
// follows is made once.
func TestPayPalApprovalByStatusQueryIsCapturedOnce(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	s, prov := startPayPal(t, paysim.Options{Faults: paysim.Faults{DropRate: 1}}, "checkout", payerSchedule)
	ns := prov.Namespace
	if err := s.SetWebhookTarget(paysim.PayPal, target.URL); err != nil {
		t.Fatal(err)
	}
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "by-query", Provider: prov.Name}})

	id := approve(t, s, v1alpha1.ProviderPayPal, p)
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseProcessing, v1alpha1.SourceStatusQuery, "approved by the payer")
	wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, v1alpha1.SourceCapture, "")
	wantNoReview(t, got)
	c := s.Counters()
	if c.CapturesByPayment[id] != 1 || c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)] != 1 {
		t.Errorf("captures of %s: %d taking effect, %d calls; want exactly 1 and 1", id, c.CapturesByPayment[id], c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)])
	}
	if n := len(m.Requests.Calls(fixture.IsKind(fixture.CallCapture))); n != 1 {
		t.Errorf("%d capture calls, want 1", n)
	}
	if w := c.WebhooksByProvider[paysim.PayPal]; w.Dropped != 2 || hits.Load() != 0 {
		t.Errorf("webhooks: %+v, %d reached the target; want both events dropped", w, hits.Load())
	}
	t.Logf("manager calls: %s", fixture.Kinds(m.Requests.Calls(nil)))
}

// TestPayPalManualCapture: a Manual PayPal order is authorized once the payer
// approves (phase Authorized, waiting for the capture) and is listed by
// `kubectl get payments --field-selector status.phase=Authorized`. The
// capture annotation takes it all; a partial one takes that much (no
// AmountMismatch review); one above the authorized amount is refused with a
// Warning Event and no call.
func TestPayPalManualCapture(t *testing.T) {
	t.Parallel()
	s, prov := startPayPal(t, paysim.Options{}, "checkout", payerSchedule)
	ns := prov.Namespace
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	manual := func(name string) *v1alpha1.Payment {
		return fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
			Payment: fixture.Payment{Namespace: ns, Name: name, Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual,
		})
	}
	all, partial := manual("capture-all"), manual("capture-part")
	unapproved := manual("unapproved")
	allID, partialID := approve(t, s, v1alpha1.ProviderPayPal, all), approve(t, s, v1alpha1.ProviderPayPal, partial)
	awaitPayer(t, unapproved)
	for _, p := range []*v1alpha1.Payment{all, partial} {
		got := awaitAuthorized(t, p)
		wantHistoryTo(t, got, v1alpha1.PhaseAuthorized, v1alpha1.SourceAuthorize, "")
	}
	c := s.Counters()
	for _, id := range []string{allID, partialID} {
		if c.AuthorizationsByPayment[id] != 1 || c.CapturesByPayment[id] != 0 {
			t.Errorf("order %s: %d authorizations, %d captures; want 1 and 0 before the capture annotation", id, c.AuthorizationsByPayment[id], c.CapturesByPayment[id])
		}
	}

	authorized := func() []string {
		var l v1alpha1.PaymentList
		// env.Client reads the API server: the selector is the API server's.
		if err := env.Client.List(context.Background(), &l, client.InNamespace(ns), client.MatchingFields{"status.phase": string(v1alpha1.PhaseAuthorized)}); err != nil {
			t.Fatalf("list payments with --field-selector status.phase=Authorized: %v", err)
		}
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return names
	}
	if got := authorized(); !slices.Equal(got, []string{all.Name, partial.Name}) {
		t.Errorf("--field-selector status.phase=Authorized lists %v, want [%s %s]", got, all.Name, partial.Name)
	}

	fixture.Annotate(t, env.Client, all, v1alpha1.AnnotationCapture, "all")
	got := fixture.WaitPhase(t, env.Client, all, v1alpha1.PhaseSucceeded, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, v1alpha1.SourceCapture, "")
	if r := got.Status.AmountReceived; r == nil || r.Value != 1999 {
		t.Errorf("%s: amountReceived %+v, want 1999", all.Name, r)
	}
	wantNoReview(t, got)
	if n := s.Counters().CapturesByPayment[allID]; n != 1 {
		t.Errorf("%s captured %d times, want 1", allID, n)
	}
	if got := authorized(); !slices.Equal(got, []string{partial.Name}) {
		t.Errorf("after the capture, --field-selector status.phase=Authorized lists %v, want [%s]", got, partial.Name)
	}

	// More than was authorized: refused before any call.
	over := fixture.Annotate(t, env.Client, partial, v1alpha1.AnnotationCapture, "5000")
	r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, partial, over)
	refused := m.Events.About(partial.Name, "CaptureRefused")
	if len(refused) != 1 || refused[0].Type != corev1.EventTypeWarning || !strings.Contains(refused[0].Message, "5000") {
		t.Errorf("CaptureRefused Events %+v, want one Warning naming 5000", refused)
	}
	if n := len(m.Requests.Calls(both(fixture.IsKind(fixture.CallCapture), onPayment(s, v1alpha1.ProviderPayPal, partialID)))); n != 0 {
		t.Errorf("%d capture calls for a capture above the authorized amount", n)
	}
	if st := fixture.GetPayment(t, env.Client, partial).Status; st.Phase != v1alpha1.PhaseAuthorized || st.Actions.Capture != "5000" || st.Operation != nil {
		t.Errorf("after the refused capture: phase %s, actions %+v, operation %+v; want Authorized, the value remembered, no operation", st.Phase, st.Actions, st.Operation)
	}
	if c := s.Counters(); c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, partial)] != 0 {
		t.Errorf("paysim saw %d capture calls", c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, partial)])
	}
	t.Logf("the refusal's reconcile: %+v", r)

	// Part of it: the rest is released.
	fixture.Annotate(t, env.Client, partial, v1alpha1.AnnotationCapture, "1000")
	got = fixture.WaitPhase(t, env.Client, partial, v1alpha1.PhaseSucceeded, fixture.Timeout)
	if r := got.Status.AmountReceived; r == nil || r.Value != 1000 || r.Currency != "USD" {
		t.Errorf("%s: amountReceived %+v, want 1000 USD", partial.Name, r)
	}
	wantNoReview(t, got)
	if v, _ := s.Payment(paysim.PayPal, partialID); v.Received != 1000 || s.Counters().CapturesByPayment[partialID] != 1 {
		t.Errorf("paysim: %s received %d in %d captures, want 1000 in 1", partialID, v.Received, s.Counters().CapturesByPayment[partialID])
	}
	if len(m.Events.About(partial.Name, "CaptureRefused")) != 1 {
		t.Errorf("CaptureRefused Events: %+v", m.Events.About(partial.Name, "CaptureRefused"))
	}
	if got := authorized(); len(got) != 0 {
		t.Errorf("--field-selector status.phase=Authorized lists %v, want none", got)
	}
	t.Logf("manager calls: %s", fixture.Kinds(m.Requests.Calls(nil)))
}

// TestCaptureAfterACrashLooksTheOutcomeUpFirst: the manager dies once the
// capture's marker (status.operation) is stored; a new manager finds the
// marker, looks the outcome up with a status query before it calls, and the
// order is captured exactly once overall. Whether the first manager died
// before its call or after it (before storing the answer), the new one
// never repeats a capture that happened; and it does not matter how the
// approval was learned: by a webhook (no status query before the marker),
// or by a status query answered a few milliseconds before the marker, which
// is not a lookup of the capture's outcome (operation.requestedAt is stored
// to the second; the query's time to the microsecond). The new manager's
// watch of payments is behind (its events arrive 2 s late, as a loaded API
// server's can): the reconcile after the lookup, requeued at once to make
// the capture, starts from the API server's copy, not the cache's older
// one. On the older copy it would look the outcome up again, and that
// lookup would mark the capture again, in a later second, again and again
// while the cache lags.
func TestCaptureAfterACrashLooksTheOutcomeUpFirst(t *testing.T) {
	t.Parallel()
	for _, approval := range []string{"query", "webhook"} {
		for _, tc := range []struct {
			name  string
			crash func() *fixture.Crash
			// The new manager's calls, and the channel that settles the payment.
			want   string
			source v1alpha1.ObservationSource
		}{{
			name:  "died between the marker and the call",
			crash: func() *fixture.Crash { return fixture.CrashAfter(fixture.OperationStored(v1alpha1.OperationCapture)) },
			// The lookup finds the order still APPROVED: then the capture
			// (which reads the order to know what to call).
			want: "token get get capture", source: v1alpha1.SourceCapture,
		}, {
			name: "died between the call and storing its answer",
			crash: func() *fixture.Crash {
				return fixture.CrashBefore(fixture.StatusOf(func(p *v1alpha1.Payment) bool { return p.Status.Phase == v1alpha1.PhaseSucceeded }))
			},
			// The lookup finds the order captured: nothing to call.
			want: "token get", source: v1alpha1.SourceStatusQuery,
		}} {
			t.Run("approved by "+approval+", "+tc.name, func(t *testing.T) {
				t.Parallel()
				s := fixture.StartSim(t, paysim.Options{})
				payersWait(t, s, paysim.PayPal, 0)
				ns := fixture.Namespace(t, env.Client, "checkout")
				spec := fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Schedule: payerSchedule}
				if approval == "webhook" {
					spec.Schedule, spec.Quiet = nil, true
				}
				prov := fixture.CreatePayPalProvider(t, env.Client, spec)
				crash := tc.crash()
				o := fixture.Run(controllers.ControllerPayment)
				o.WrapClient = crash.Wrap
				first := fixture.StartManager(t, env, ns, o)
				p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "crash", Provider: prov.Name}})
				id := approve(t, s, v1alpha1.ProviderPayPal, p)
				if approval == "webhook" {
					if out := fixture.ApplyWebhook(t, first, prov, fixture.SimEvent(t, s, v1alpha1.ProviderPayPal, id)); out.Result != v1alpha1.ResultApplied {
						t.Fatalf("the approval's webhook: %+v", out)
					}
				}
				crash.Wait(t)
				first.Stop()
				key := fixture.CaptureKey(v1alpha1.ProviderPayPal, p)
				before := s.Counters()

				stored := fixture.GetPayment(t, env.Client, p)
				if op := stored.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture || op.LastAttemptAt != nil || stored.Status.Phase != v1alpha1.PhaseProcessing {
					t.Fatalf("after the crash: phase %s, operation %+v; want Processing with the capture's marker", stored.Status.Phase, op)
				}
				restarted := time.Now()
				lag := fixture.NewWatchLag(2*time.Second, fixture.PaymentWatches(true))
				o = fixture.Run(controllers.ControllerPayment)
				o.Config = lag.Config(env.Config)
				second := fixture.StartManager(t, env, ns, o)
				lag.Start()
				got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)

				calls := second.Requests.Calls(nil)
				if k := fixture.Kinds(calls); k != tc.want {
					t.Errorf("the new manager's calls: %s; want %s (a status query first)", k, tc.want)
				}
				if lt := got.Status.Query.LastTime; lt == nil || lt.Time.Before(restarted) {
					t.Errorf("no status query stored by the new manager: query.lastTime %v, the marker's requestedAt %s, restarted at %s",
						lt, stored.Status.Operation.RequestedAt.UTC().Format(time.RFC3339Nano), restarted.UTC().Format(time.RFC3339Nano))
				}
				wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, tc.source, "")
				c := s.Counters()
				if c.CapturesByPayment[id] != 1 || c.ActionsByKey[key] != 1 {
					t.Errorf("order %s: %d captures taking effect, %d capture calls (%d before the restart); want exactly 1 and 1",
						id, c.CapturesByPayment[id], c.ActionsByKey[key], before.ActionsByKey[key])
				}
				wantNoReview(t, got)
				if lag.Lagged() == 0 {
					t.Error("the new manager's watch of payments was not lagged: the test proves less than it says")
				}
				t.Logf("first manager: %s; new manager: %s", fixture.Kinds(first.Requests.Calls(nil)), fixture.Kinds(calls))
			})
		}
	}
}

// TestCaptureWithoutAnAnswerIsLookedUpFirst: a capture call that gets no
// answer (a 500) has an unknown outcome. paywarden looks it up before it
// would call again: when paysim captured and lost the answer, the order is
// found captured and nothing is called twice; when paysim answered 500
// without capturing, the order is found still approved and the capture is
// repeated with the same key, taking effect once.
func TestCaptureWithoutAnAnswerIsLookedUpFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		faults paysim.Faults
		// The calls from the first capture on, the capture calls that
		// reached paysim's capture logic (with the one key), and the channel
		// that settles the payment.
		want   string
		calls  int
		source v1alpha1.ObservationSource
	}{{
		name:   "captured, answer lost",
		faults: paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCapture}},
		want:   "capture get", calls: 1, source: v1alpha1.SourceStatusQuery,
	}, {
		name:   "not captured, answered 500",
		faults: paysim.Faults{ServerErrorRate: 1, Operations: []string{paysim.OpCapture}},
		// The lookup, then the capture (which reads the order first). The
		// 500 came before paysim's capture logic: one call reached it.
		want: "capture get get capture", calls: 1, source: v1alpha1.SourceCapture,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The capture's outcome is looked up a first step (1s) after the
			// call: time enough to end the fault before.
			schedule := append([]string{"1s"}, payerSchedule[1:]...)
			s, prov := startPayPal(t, paysim.Options{Faults: tc.faults}, "checkout", schedule)
			ns := prov.Namespace
			m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
			p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "no-answer", Provider: prov.Name}})
			id := approve(t, s, v1alpha1.ProviderPayPal, p)

			fixture.Eventually(t, fixture.Timeout, "the capture's answer to be lost", func() bool {
				f := s.Counters().APIFaults
				return f.LostResponses+f.ServerErrors == 1
			})
			s.SetFaults(paysim.Faults{})
			got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
			wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, tc.source, "")
			wantNoReview(t, got)
			c := s.Counters()
			if c.CapturesByPayment[id] != 1 || c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)] != tc.calls {
				t.Errorf("order %s: %d captures taking effect, %d capture calls with its key; want exactly 1 and %d",
					id, c.CapturesByPayment[id], c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderPayPal, got)], tc.calls)
			}
			calls := m.Requests.Calls(nil)
			i := slices.IndexFunc(calls, fixture.IsKind(fixture.CallCapture))
			if i < 0 || fixture.Kinds(calls[i:]) != tc.want || calls[i].Status != http.StatusInternalServerError {
				t.Errorf("the manager's calls: %s; want the capture answered 500, then %s", fixture.Kinds(calls), tc.want)
			}
		})
	}
}

// TestCancel: the cancel annotation voids an authorization (phase Canceled,
// the reason in history); an order the payer never approved is canceled
// without a money-moving call (PayPal has no call to cancel an order, and
// takes no money without the merchant's); a payment that took the money is
// not canceled: a Warning Event points at a Refund, and nothing is called.
func TestCancel(t *testing.T) {
	t.Parallel()
	// The unapproved order is queried while the other two are approved,
	// authorized and paid: refundSchedule (about 54 s) lasts longer than
	// that takes on a loaded machine, so it is never given up on (review
	// RetriesExhausted) before its cancel.
	s, prov := startPayPal(t, paysim.Options{}, "checkout", refundSchedule)
	ns := prov.Namespace
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	create := func(name string, method v1alpha1.CaptureMethod) *v1alpha1.Payment {
		return fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: name, Provider: prov.Name}, CaptureMethod: method})
	}
	authorized, abandoned, paid := create("authorized", v1alpha1.CaptureManual), create("abandoned", v1alpha1.CaptureAutomatic), create("paid", v1alpha1.CaptureAutomatic)
	authorizedID, paidID := approve(t, s, v1alpha1.ProviderPayPal, authorized), approve(t, s, v1alpha1.ProviderPayPal, paid)
	abandonedID := awaitPayer(t, abandoned).Status.ProviderPaymentID
	awaitAuthorized(t, authorized)
	fixture.WaitPhase(t, env.Client, paid, v1alpha1.PhaseSucceeded, fixture.Timeout)

	t.Run("an authorization is voided", func(t *testing.T) {
		fixture.Annotate(t, env.Client, authorized, v1alpha1.AnnotationCancel, "order withdrawn")
		got := fixture.WaitPhase(t, env.Client, authorized, v1alpha1.PhaseCanceled, fixture.Timeout)
		wantHistoryTo(t, got, v1alpha1.PhaseCanceled, v1alpha1.SourceCancel, v1alpha1.ReasonCanceledByOperator+": order withdrawn")
		if c := s.Counters(); c.VoidsByPayment[authorizedID] != 1 || c.CapturesByPayment[authorizedID] != 0 {
			t.Errorf("order %s: %d voids, %d captures; want 1 and 0", authorizedID, c.VoidsByPayment[authorizedID], c.CapturesByPayment[authorizedID])
		}
		if v, _ := s.Payment(paysim.PayPal, authorizedID); v.Authorization == nil || v.Authorization.Status != "VOIDED" {
			t.Errorf("paysim's authorization: %+v, want VOIDED", v.Authorization)
		}
		wantNoReview(t, got)
	})

	t.Run("an unapproved order is canceled without a money-moving call", func(t *testing.T) {
		annotated := time.Now()
		fixture.Annotate(t, env.Client, abandoned, v1alpha1.AnnotationCancel, "payer gave up")
		got := fixture.WaitPhase(t, env.Client, abandoned, v1alpha1.PhaseCanceled, fixture.Timeout)
		wantHistoryTo(t, got, v1alpha1.PhaseCanceled, v1alpha1.SourceCancel, v1alpha1.ReasonCanceledByOperator+": payer gave up")
		if got.Status.CustomerAction != nil || got.Status.WaitingFor != "" {
			t.Errorf("a canceled payment keeps customerAction %+v, waitingFor %q", got.Status.CustomerAction, got.Status.WaitingFor)
		}
		// The adapter reads the order to know whether anything must be
		// voided; PayPal has no call that cancels an order.
		sinceCancel := m.Requests.Calls(both(onPayment(s, v1alpha1.ProviderPayPal, abandonedID), func(c fixture.Call) bool { return c.At.After(annotated) }))
		if k := fixture.Kinds(sinceCancel); len(sinceCancel) == 0 || strings.Trim(strings.ReplaceAll(k, "get", ""), " ") != "" {
			t.Errorf("calls about the unapproved order since the cancel: %q; want reads only", k)
		}
		if n := len(m.Requests.Calls(both(fixture.IsPost, onPayment(s, v1alpha1.ProviderPayPal, abandonedID)))); n != 0 {
			t.Errorf("%d POSTs about the unapproved order", n)
		}
		if c := s.Counters(); c.VoidsByPayment[abandonedID] != 0 || c.ActionsByKey["paypal/"+abandoned.IdempotencyKey()+"/cancel"] != 0 {
			t.Errorf("%d voids, %d cancel calls of an unapproved order", c.VoidsByPayment[abandonedID], c.ActionsByKey["paypal/"+abandoned.IdempotencyKey()+"/cancel"])
		}
		t.Logf("calls about the unapproved order since the cancel: %s", fixture.Kinds(sinceCancel))
	})

	t.Run("a payment that took the money is not canceled", func(t *testing.T) {
		callsBefore := len(m.Requests.Calls(nil))
		touched := fixture.Annotate(t, env.Client, paid, v1alpha1.AnnotationCancel, "too late")
		r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, paid, touched)
		refused := m.Events.About(paid.Name, "CancelRefused")
		if len(refused) != 1 || refused[0].Type != corev1.EventTypeWarning || !strings.Contains(refused[0].Message, "Refund") {
			t.Errorf("CancelRefused Events %+v, want one Warning naming the Refund", refused)
		}
		if n := len(m.Requests.Calls(nil)); n != callsBefore {
			t.Errorf("%d provider calls for a refused cancel: %s", n-callsBefore, fixture.Kinds(m.Requests.Calls(nil)[callsBefore:]))
		}
		got := fixture.GetPayment(t, env.Client, paid)
		if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.Actions.Cancel != "too late" {
			t.Errorf("after the refused cancel: phase %s, actions %+v; want Succeeded, the value remembered", got.Status.Phase, got.Status.Actions)
		}
		if c := s.Counters(); c.VoidsByPayment[paidID] != 0 {
			t.Errorf("%d voids of a captured order", c.VoidsByPayment[paidID])
		}
		if r.Scheduled() {
			t.Errorf("the refused cancel of a settled payment scheduled another reconcile: %+v", r)
		}
	})
}

// TestCancelWhileACheckoutCreateIsUnknown: a PayPal checkout whose create was
// sent but never answered (an earlier manager died; the create never reached
// PayPal) is canceled. PayPal cannot look a payment up by merchant
// reference, so the create is repeated with its key (it takes no money; here
// it creates an order nobody can pay) and that order is canceled, instead of
// the payment being parked in Unknown/CreateOutcomeUnknown.
func TestCancelWhileACheckoutCreateIsUnknown(t *testing.T) {
	t.Parallel()
	s, prov := startPayPal(t, paysim.Options{}, "checkout", payerSchedule)
	ns := prov.Namespace
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "lost-create", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureAutomatic})
	fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		marked := metav1.NewTime(time.Now().Add(-time.Minute))
		st.Phase, st.CreateRequestedAt = v1alpha1.PhasePending, &marked
	})
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationCancel, "order withdrawn")
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseCanceled, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseCanceled, v1alpha1.SourceCancel, v1alpha1.ReasonCanceledByOperator+": order withdrawn")
	wantNoReview(t, got)
	if got.Status.ProviderPaymentID == "" {
		t.Errorf("canceled without learning the order: %+v", got.Status)
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("%d orders created at PayPal, want 1 (the repeated create)", n)
	}
}

// TestAuthorizationExpiresUncaptured: an authorization nobody captures runs
// out at PayPal (no webhook is delivered here: TestPayPalAuthorizationVoidedAtItsEndIsExpired
// has PayPal's VOIDED); a status query finds it and the payment is Expired
// with reason AuthorizationExpired.
func TestAuthorizationExpiresUncaptured(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{})
	payersWait(t, s, paysim.PayPal, 200*time.Second) // 2s here
	ns := fixture.Namespace(t, env.Client, "checkout")
	prov := fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Schedule: payerSchedule})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment: fixture.Payment{Namespace: ns, Name: "left-authorized", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual,
	})
	id := approve(t, s, v1alpha1.ProviderPayPal, p)
	awaitAuthorized(t, p)

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseExpired, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseExpired, v1alpha1.SourceStatusQuery, v1alpha1.ReasonAuthorizationExpired)
	if v, _ := s.Payment(paysim.PayPal, id); v.Authorization == nil || v.Authorization.Status != "EXPIRED" {
		t.Errorf("paysim's authorization: %+v, want EXPIRED", v.Authorization)
	}
	if got.Status.ExpiredLocally || got.Status.Query.NextTime != nil || got.Status.WaitingFor != "" {
		t.Errorf("expired: expiredLocally %v, next query %v, waitingFor %q; want the provider's expiry, nothing scheduled", got.Status.ExpiredLocally, got.Status.Query.NextTime, got.Status.WaitingFor)
	}
	if n := len(m.Requests.Calls(fixture.IsKind(fixture.CallCapture))); n != 0 || s.Counters().CapturesByPayment[id] != 0 {
		t.Errorf("%d capture calls for an authorization nobody captured", n)
	}
}

// TestKukoPayCheckoutAndManualCapture: a KukoPay payment that needs the
// payer shows the hosted checkout's link in status.customerAction and waits
// for the Payer; once the payer completes, a Manual one is authorized
// (requires_capture: phase Authorized, waiting for the capture), and the
// capture annotation takes the money once.
func TestKukoPayCheckoutAndManualCapture(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "checkout")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: payerSchedule})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment:       fixture.Payment{Namespace: ns, Name: "hosted", Provider: prov.Name, Outcome: paysim.OutcomeNeedsAction},
		CaptureMethod: v1alpha1.CaptureManual, ReturnURL: "https://shop.example/return", CancelURL: "https://shop.example/cancel",
	})

	waiting := awaitPayer(t, p)
	id := waiting.Status.ProviderPaymentID
	v, _ := s.Payment(paysim.KukoPay, id)
	if a := waiting.Status.CustomerAction; a.URL != v.ActionURL || !strings.Contains(a.URL, "/kukopay/checkout/"+id) || a.ExpiresAt == nil || !a.ExpiresAt.Time.Equal(v.ActionExpiresAt.Truncate(time.Second)) {
		t.Errorf("customerAction %+v; want paysim's hosted checkout %q until %s", a, v.ActionURL, v.ActionExpiresAt)
	}
	if waiting.Status.Phase != v1alpha1.PhasePending || waiting.Status.WaitingFor != "Payer" || waiting.Status.ProviderStatus != "requires_action" {
		t.Errorf("phase %s, waitingFor %q, provider status %q; want Pending, Payer, requires_action", waiting.Status.Phase, waiting.Status.WaitingFor, waiting.Status.ProviderStatus)
	}
	m.Events.Wait(t, corev1.EventTypeNormal, "CustomerActionRequired")

	if err := s.Approve(paysim.KukoPay, id); err != nil {
		t.Fatal(err)
	}
	authorized := awaitAuthorized(t, p)
	if authorized.Status.ProviderStatus != "requires_capture" || authorized.Status.CustomerAction != nil {
		t.Errorf("authorized: provider status %q, customerAction %+v; want requires_capture and no link", authorized.Status.ProviderStatus, authorized.Status.CustomerAction)
	}
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationCapture, "all")
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseSucceeded, v1alpha1.SourceCapture, "")
	if r := got.Status.AmountReceived; r == nil || r.Value != 1999 {
		t.Errorf("amountReceived %+v, want 1999", r)
	}
	wantNoReview(t, got)
	c := s.Counters()
	if c.CapturesByPayment[id] != 1 || c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderKukoPay, got)] != 1 {
		t.Errorf("payment %s: %d captures taking effect, %d capture calls; want 1 and 1", id, c.CapturesByPayment[id], c.ActionsByKey[fixture.CaptureKey(v1alpha1.ProviderKukoPay, got)])
	}
	if n := len(m.Events.About(p.Name, "CustomerActionRequired")); n != 1 {
		t.Errorf("%d CustomerActionRequired Events, want 1", n)
	}
	t.Logf("manager calls: %s", fixture.Kinds(m.Requests.Calls(nil)))
}
