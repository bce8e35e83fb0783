package payment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// What an authorize, capture or cancel call's failures mean (SPEC §11.5).

// capturing is a Manual payment, authorized, its capture marked.
func capturing(t *testing.T) *v1alpha1.Payment {
	t.Helper()
	p := authorizedPay("order-1", v1alpha1.CaptureManual)
	p.Annotations = map[string]string{v1alpha1.AnnotationCapture: "all"}
	out, _, _ := payment.OperatorAction(p, t0)
	p = store(p, out)
	if p.Status.Operation == nil {
		t.Fatal("no capture marker")
	}
	return p
}

// TestAnOperationWithoutAnAnswerHonoursRetryAfter: the retry waits for the
// provider's Retry-After when it is longer than the backoff, and no longer
// than the backoff when it is shorter.
func TestAnOperationWithoutAnAnswerHonoursRetryAfter(t *testing.T) {
	pol := testPolicy()
	backoff := pol.Schedule[0]
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration
	}{
		{"none", 0, backoff},
		{"longer than the backoff", backoff + time.Hour, backoff + time.Hour},
		{"shorter than the backoff", backoff / 2, backoff},
	} {
		p := capturing(t)
		err := &provider.Error{Provider: "shop/kukopay", Op: "capture", Class: provider.ErrRetryable, StatusCode: 503, RetryAfter: tc.retryAfter}
		out := payment.AfterOperation(p, pol, v1alpha1.OperationCapture, payment.Call{Err: err}, t0)
		if op := out.Status.Operation; op == nil || op.RetryAt == nil || !op.RetryAt.Time.Equal(t0.Add(tc.want)) {
			t.Errorf("%s: operation %+v, want a retry at +%v", tc.name, op, tc.want)
		}
	}
}

// TestARefusedOperation: a capture or cancel the merchant asked for and the
// provider refused ends with a Warning, and the provider's view decides what
// comes next (a query at once); an automatic capture refused needs a human;
// a close-out refused is a Normal Event and a fresh query.
func TestARefusedOperation(t *testing.T) {
	pol := testPolicy()
	refused := payment.Call{Err: &provider.Error{Provider: "shop/kukopay", Op: "capture", Class: provider.ErrNonRetryable, StatusCode: 422, Detail: "authorization expired"}}

	manual := capturing(t)
	out := payment.AfterOperation(manual, pol, v1alpha1.OperationCapture, refused, t0)
	if e := eventOf(out.Events, "CaptureRefused"); e == nil || !e.Warning {
		t.Errorf("a merchant's capture refused: Events %+v, want a CaptureRefused Warning", out.Events)
	}
	if out.Status.Operation != nil || out.Status.Phase != v1alpha1.PhaseAuthorized || out.Status.Query.NextTime == nil || !out.Status.Query.NextTime.Time.Equal(t0.Add(payment.MinWait)) {
		t.Errorf("a merchant's capture refused: phase %s operation %+v next %v; want Authorized, a query at once", out.Status.Phase, out.Status.Operation, out.Status.Query.NextTime)
	}

	cancel := created("order-2")
	cancel.Annotations = map[string]string{v1alpha1.AnnotationCancel: "customer asked"}
	o, _, _ := payment.OperatorAction(cancel, t0)
	cancel = store(cancel, o)
	out = payment.AfterOperation(cancel, pol, v1alpha1.OperationCancel, refused, t0)
	if e := eventOf(out.Events, "CancelRefused"); e == nil || !e.Warning || out.Status.Query.NextTime == nil {
		t.Errorf("a cancel refused: Events %+v next %v, want a CancelRefused Warning and a query", out.Events, out.Status.Query.NextTime)
	}

	automatic := authorizedPay("order-3", v1alpha1.CaptureAutomatic)
	step := payment.Plan(automatic, pol, payment.Facts{}, t0)
	automatic = store(automatic, step.Outcome)
	if op := automatic.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture {
		t.Fatalf("an automatic capture: %s (%s), operation %+v", step.Action, step.Why, op)
	}
	out = payment.AfterOperation(automatic, pol, v1alpha1.OperationCapture, refused, t0)
	if out.Status.Phase != v1alpha1.PhaseUnknown || out.Status.Query.NextTime != nil || eventOf(out.Events, "CaptureRefused") != nil {
		t.Errorf("an automatic capture refused: phase %s next %v Events %+v; want Unknown for review, no query, no CaptureRefused", out.Status.Phase, out.Status.Query.NextTime, out.Events)
	}
	if c := store(automatic, out); review(c) != v1alpha1.ReasonCaptureRefused {
		t.Errorf("an automatic capture refused: review %q, want %s", review(c), v1alpha1.ReasonCaptureRefused)
	}
}

// TestACloseOutRefusedIsNormal: the provider refusing paywarden's own
// close-out is no fault of anyone's: a Normal Event, and a query at once.
func TestACloseOutRefusedIsNormal(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true}, true
	past := t0.Add(11 * time.Minute)
	p := expiresAfter(created("close-out"), 10*time.Minute)
	closing := payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past)
	if e := eventOf(closing.Events, "CloseOutRequested"); e == nil || e.Warning {
		t.Errorf("the close-out's query: Events %+v, want a Normal CloseOutRequested", closing.Events)
	}
	p = store(p, closing)
	out := payment.AfterOperation(p, pol, v1alpha1.OperationCancel, fails(errRefused), past)
	if e := eventOf(out.Events, "CloseOutRefused"); e == nil || e.Warning || eventOf(out.Events, "CancelRefused") != nil {
		t.Errorf("Events %+v, want a Normal CloseOutRefused and no CancelRefused", out.Events)
	}
	if n := out.Status.Query.NextTime; n == nil || !n.Time.Equal(past.Add(payment.MinWait)) {
		t.Errorf("next query %v, want at once", n)
	}
}

// TestAnUnansweredOperationLookedUp: the status query after an operation
// without an answer decides whether it happened: the payment settled, or
// showing the capture under way (Processing, its amount to capture set, not
// the payer's approval), ends the operation; still Authorized, the capture
// is repeated at once with its key. An authorization shows as Authorized.
func TestAnUnansweredOperationLookedUp(t *testing.T) {
	pol := testPolicy()
	lost := func(t *testing.T) *v1alpha1.Payment {
		p := capturing(t)
		return store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errNoAnswer), t0))
	}
	for _, tc := range []struct {
		name   string
		answer provider.Status
		done   bool
	}{
		{"paid", provider.StatusSucceeded, true},
		{"the capture under way", provider.StatusProcessing, true},
		{"still authorized", provider.StatusAuthorized, false},
	} {
		p := lost(t)
		key := p.Status.Operation.IdempotencyKey
		got := store(p, payment.AfterQuery(p, pol, answer(tc.answer), false, t0.Add(time.Minute)))
		switch op := got.Status.Operation; {
		case tc.done && op != nil:
			t.Errorf("%s: the operation goes on: %+v", tc.name, op)
		case !tc.done && (op == nil || op.RetryAt != nil || op.IdempotencyKey != key):
			t.Errorf("%s: operation %+v, want it repeated at once with %s", tc.name, op, key)
		}
	}

	approved := withOperation(approvedOrder("auth"), v1alpha1.OperationAuthorize, t0.Add(time.Minute))
	approved = store(approved, payment.AfterOperation(approved, paypalPolicy(), v1alpha1.OperationAuthorize, fails(errNoAnswer), t0.Add(time.Minute)))
	for _, tc := range []struct {
		answer provider.Status
		done   bool
	}{{provider.StatusAuthorized, true}, {provider.StatusProcessing, false}} {
		got := store(approved, payment.AfterQuery(approved, paypalPolicy(), answer(tc.answer), false, t0.Add(2*time.Minute)))
		if (got.Status.Operation == nil) != tc.done {
			t.Errorf("an authorization looked up, %s: operation %+v, want done %v", tc.answer, got.Status.Operation, tc.done)
		}
	}
}

// TestACreateWithoutAnAnswerBacksOff: a create that gets no answer, or an
// answer naming no payment, is repeated with its key on the create's
// backoff: the schedule's first steps, one further for each in a row.
func TestACreateWithoutAnAnswerBacksOff(t *testing.T) {
	pol := testPolicy()
	for name, call := range map[string]payment.Call{
		"no answer":                   fails(errNoAnswer),
		"an answer naming no payment": {Payment: provider.Payment{Status: provider.StatusPending}},
	} {
		p := newPay("order-1")
		p = store(p, planned(p, pol, t0).Outcome)
		p = store(p, payment.AfterCreate(p, pol, call, t0))
		p = store(p, payment.AfterCreate(p, pol, call, t0.Add(time.Hour)))
		q := p.Status.Query
		if q.ConsecutiveErrors != 2 || q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(time.Hour+pol.Schedule[1])) || p.Status.ProviderPaymentID != "" {
			t.Errorf("%s twice: %+v; want 2 errors, the next create at the backoff's second step (%v)", name, q, pol.Schedule[1])
		}
	}
}

// TestALookUpPastExpiry: a payment whose create went unanswered, found by
// its look-up unpaid after spec.expiresAfter, is closed out; found before
// it, it is followed.
func TestALookUpPastExpiry(t *testing.T) {
	pol := testPolicy()
	p := expiresAfter(newPay("order-1"), 10*time.Minute)
	p = store(p, planned(p, pol, t0).Outcome)
	p = store(p, payment.AfterCreate(p, pol, fails(errNoAnswer), t0))
	before := store(p, payment.AfterLookup(p, pol, answer(provider.StatusPending), t0.Add(5*time.Minute)))
	if before.Status.Phase != v1alpha1.PhasePending || before.Status.ProviderPaymentID != "pay_1" {
		t.Errorf("found unpaid before expiresAfter: phase %s id %q, want Pending, followed", before.Status.Phase, before.Status.ProviderPaymentID)
	}
	after := store(p, payment.AfterLookup(p, pol, answer(provider.StatusPending), t0.Add(11*time.Minute)))
	if after.Status.Phase != v1alpha1.PhaseExpired {
		t.Errorf("found unpaid past expiresAfter: phase %s, want Expired", after.Status.Phase)
	}
}

// TestALookUpAnsweredWithoutAPaymentId: past the key window, a look-up
// answered without a payment id found nothing usable: Unknown for a human,
// never a create again.
func TestALookUpAnsweredWithoutAPaymentId(t *testing.T) {
	pol := testPolicy()
	p := newPay("order-1")
	p = store(p, planned(p, pol, t0).Outcome)
	p = store(p, payment.AfterCreate(p, pol, fails(errNoAnswer), t0))
	late := t0.Add(pol.LookupAfter() + time.Minute)
	got := store(p, payment.AfterLookup(p, pol, payment.Call{Payment: provider.Payment{Status: provider.StatusSucceeded}}, late))
	if got.Status.Phase != v1alpha1.PhaseUnknown || review(got) != v1alpha1.ReasonCreateOutcomeUnknown || got.Status.ProviderPaymentID != "" {
		t.Errorf("phase %s review %q id %q; want Unknown + CreateOutcomeUnknown, no id", got.Status.Phase, review(got), got.Status.ProviderPaymentID)
	}
}

// TestLookUpsWithoutAnAnswer: a look-up of a create's outcome without an
// answer backs off as the create does; inside the key window after a key
// conflict, an answer naming no payment is no verdict and says so; the
// look-up of an operation's outcome honours Retry-After.
func TestLookUpsWithoutAnAnswer(t *testing.T) {
	pol := testPolicy()
	unknown := func() *v1alpha1.Payment {
		p := newPay("order-1")
		p = store(p, planned(p, pol, t0).Outcome)
		return store(p, payment.AfterCreate(p, pol, fails(errNoAnswer), t0))
	}
	late := t0.Add(pol.LookupAfter() + time.Minute)
	p := unknown()
	p = store(p, payment.AfterLookup(p, pol, fails(errNoAnswer), late))
	if q := p.Status.Query; q.ConsecutiveErrors != 2 || q.NextTime == nil || !q.NextTime.Time.Equal(late.Add(pol.Schedule[1])) {
		t.Errorf("a look-up without an answer after a create without one: %+v; want the backoff's second step (%v)", q, pol.Schedule[1])
	}

	conflict := &provider.Error{Provider: "shop/kukopay", Op: "create", Class: provider.ErrKeyConflict, StatusCode: 409}
	c := newPay("order-2")
	c = store(c, planned(c, pol, t0).Outcome)
	c = store(c, payment.AfterCreate(c, pol, fails(conflict), t0))
	if c.Status.Query.LastErrorClass != payment.KeyConflict.StatusName() {
		t.Fatalf("after a key conflict: %+v", c.Status.Query)
	}
	c = store(c, payment.AfterLookup(c, pol, payment.Call{Payment: provider.Payment{Status: provider.StatusPending}}, t0.Add(time.Minute)))
	if c.Status.Phase.IsFinal() || review(c) != "" || !strings.Contains(c.Status.Query.LastError, "the provider answered without a payment id") {
		t.Errorf("inside the window after a key conflict, an answer naming no payment: phase %s review %q query %+v", c.Status.Phase, review(c), c.Status.Query)
	}

	lost := capturing(t)
	lost = store(lost, payment.AfterOperation(lost, pol, v1alpha1.OperationCapture, fails(errNoAnswer), t0))
	slow := &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrRetryable, StatusCode: 429, RetryAfter: 2 * time.Hour}
	got := store(lost, payment.AfterQuery(lost, pol, payment.Call{Err: slow}, false, t0.Add(time.Minute)))
	if op := got.Status.Operation; op == nil || op.RetryAt == nil || !op.RetryAt.Time.Equal(t0.Add(time.Minute+2*time.Hour)) {
		t.Errorf("an operation's look-up answered Retry-After 2h: %+v", op)
	}
}

// TestAQueryCountsAnAttempt: a status query answered consumes an attempt of
// a payment waiting for the provider, Manual or not; one answered with
// another amount than asked parks the payment with no query after it.
func TestAQueryCountsAnAttempt(t *testing.T) {
	pol := testPolicy()
	manual := lifecyclePay("manual", v1alpha1.CaptureManual)
	manual = store(manual, payment.AfterQuery(manual, pol, answer(provider.StatusPending), false, t0.Add(time.Minute)))
	if manual.Status.Query.Attempts != 1 || manual.Status.Query.NextTime == nil {
		t.Errorf("a Manual payment still pending: %+v, want an attempt consumed and a next query", manual.Status.Query)
	}
	p := created("order-1")
	paid := answer(provider.StatusSucceeded)
	paid.Payment.Amount = orderValue - 1
	p = store(p, payment.AfterQuery(p, pol, paid, false, t0.Add(time.Minute)))
	if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonAmountMismatch || p.Status.Query.NextTime != nil {
		t.Errorf("paid another amount: phase %s review %q next %v; want parked, no query", p.Status.Phase, review(p), p.Status.Query.NextTime)
	}
}

// TestACreatesFailuresHonourRetryAfter: a create without an answer, or one
// refused for a key conflict, waits for the provider's Retry-After when it
// is longer than the backoff; the time since the first unanswered call is
// kept across them.
func TestACreatesFailuresHonourRetryAfter(t *testing.T) {
	pol := testPolicy()
	for name, class := range map[string]error{"no answer": provider.ErrRetryable, "a key conflict": provider.ErrKeyConflict} {
		p := newPay("order-1")
		p = store(p, planned(p, pol, t0).Outcome)
		slow := &provider.Error{Provider: "shop/kukopay", Op: "create", Class: class, StatusCode: 429, RetryAfter: 2 * time.Hour}
		p = store(p, payment.AfterCreate(p, pol, fails(slow), t0))
		q := p.Status.Query
		if q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(2*time.Hour)) || q.UnansweredSince == nil || !q.UnansweredSince.Time.Equal(t0) {
			t.Errorf("%s with Retry-After 2h: %+v", name, q)
		}
		fast := &provider.Error{Provider: "shop/kukopay", Op: "create", Class: class, StatusCode: 429, RetryAfter: time.Millisecond}
		p = store(p, payment.AfterCreate(p, pol, fails(fast), t0.Add(2*time.Hour)))
		q = p.Status.Query
		if q.NextTime == nil || !q.NextTime.Time.After(t0.Add(2*time.Hour+time.Second)) || q.UnansweredSince == nil || !q.UnansweredSince.Time.Equal(t0) {
			t.Errorf("%s with Retry-After 1ms: %+v; want the backoff, unanswered since the first", name, q)
		}
	}
}

// TestACreateAnswerThatParksStartsNoSchedule: a create answered paid with
// another amount than asked parks the payment; no query is scheduled.
func TestACreateAnswerThatParksStartsNoSchedule(t *testing.T) {
	pol := testPolicy()
	p := newPay("order-1")
	p = store(p, planned(p, pol, t0).Outcome)
	paid := answer(provider.StatusSucceeded)
	paid.Payment.Amount = orderValue + 1
	p = store(p, payment.AfterCreate(p, pol, paid, t0))
	if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonAmountMismatch || p.Status.Query.NextTime != nil {
		t.Errorf("phase %s review %q next %v; want parked, no query", p.Status.Phase, review(p), p.Status.Query.NextTime)
	}
}
