package payment_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The schedule and give-up rules (SPEC §2.2–§2.5, §11.2–§11.4) as table and
// scenario tests on the pure functions, with a fake clock.

var (
	t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	errNoAnswer     = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrRetryable, StatusCode: 503}
	errTimeout      = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrRetryable, Err: errors.New("context deadline exceeded")}
	errThrottled    = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrRetryable, StatusCode: 429, RetryAfter: 90 * time.Second}
	errInProgress   = &provider.Error{Provider: "shop/kukopay", Op: "create", Class: provider.ErrRetryable, StatusCode: 409}
	errUnauthorized = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrProviderConfig, StatusCode: 401}
	errForbidden    = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrProviderConfig, StatusCode: 403}
	errRedirect     = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrProviderConfig, StatusCode: 302}
	errNoRoute      = &provider.Error{Provider: "shop/kukopay", Op: "create", Class: provider.ErrProviderConfig, StatusCode: 404}
	errNotFound     = &provider.Error{Provider: "shop/kukopay", Op: "get", Class: provider.ErrNotFound, StatusCode: 404}
	errRefused      = &provider.Error{Provider: "shop/kukopay", Op: "create", Class: provider.ErrNonRetryable, StatusCode: 400, Detail: "amount: must be positive"}
	errUnsupported  = provider.Unsupported("shop/paypal", "find")
	errAmount       = &provider.Error{Provider: "shop/paypal", Op: "create", Class: provider.ErrNonRetryable, Err: fmt.Errorf("%w: HUF 1999.50 has fillér, PayPal takes whole forints", provider.ErrAmountNotRepresentable)}
)

// testPolicy is the default policy without jitter, so waits are exact.
func testPolicy() payment.Policy {
	pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{})
	pol.JitterPercent = 0
	return pol
}

func newPay(name string) *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:      v1alpha1.Amount{Value: orderValue, Currency: orderCurrency},
		},
	}
}

// expiresAfter sets p's spec.expiresAfter to d.
func expiresAfter(p *v1alpha1.Payment, d time.Duration) *v1alpha1.Payment {
	p.Spec.ExpiresAfter = &metav1.Duration{Duration: d}
	return p
}

func store(p *v1alpha1.Payment, out payment.Outcome) *v1alpha1.Payment {
	cp := p.DeepCopy()
	out.StoreIn(cp)
	return cp
}

func answer(status provider.Status) payment.Call {
	return payment.Call{Payment: provider.Payment{ID: "pay_1", Status: status, RawStatus: strings.ToLower(string(status)), Amount: orderValue, Currency: orderCurrency}}
}

func fails(err error) payment.Call { return payment.Call{Err: err} }

func micro(t time.Time) *metav1.MicroTime { m := metav1.NewMicroTime(t); return &m }

func review(p *v1alpha1.Payment) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

// created is a payment the provider knows as pay_1, pending, with its first
// status query due at t0+30s.
func created(name string) *v1alpha1.Payment {
	pol := testPolicy()
	p := newPay(name)
	p = store(p, planned(p, pol, t0).Outcome)                                     // the marker
	p = store(p, payment.AfterCreate(p, pol, answer(provider.StatusPending), t0)) // the answer
	return p
}

func planned(p *v1alpha1.Payment, pol payment.Policy, now time.Time) payment.Step {
	return payment.Plan(p, pol, payment.Facts{}, now)
}

// TestKeyWindowMarginFromTheProvider: the margin of
// spec.idempotencyWindowMargin moves the switch from repeating a create to
// looking the payment up; 0 repeats the create to the window's end.
func TestKeyWindowMarginFromTheProvider(t *testing.T) {
	int32p := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		margin *int32
		lookup time.Duration // after the marker
	}{
		{margin: nil, lookup: 24 * time.Hour * 90 / 100},
		{margin: int32p(0), lookup: 24 * time.Hour},
		{margin: int32p(25), lookup: 18 * time.Hour},
		{margin: int32p(90), lookup: 24 * time.Hour * 10 / 100},
	} {
		name := "default"
		if tc.margin != nil {
			name = fmt.Sprintf("%d%%", *tc.margin)
		}
		t.Run(name, func(t *testing.T) {
			pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{IdempotencyWindow: &metav1.Duration{Duration: 24 * time.Hour}, IdempotencyWindowMargin: tc.margin})
			wantLookupAfter(t, pol, tc.lookup)
		})
	}
}

// wantLookupAfter checks that under pol a create marked at t0 is repeated
// with its key until lookup after the marker, and looked up from then on.
func wantLookupAfter(t *testing.T, pol payment.Policy, lookup time.Duration) {
	t.Helper()
	pol.JitterPercent = 0
	p := newPay("window")
	p = store(p, planned(p, pol, t0).Outcome)
	if got := planned(p, pol, t0.Add(lookup-time.Second)).Action; got != payment.Create {
		t.Errorf("a second before %v: %v, want the create repeated with its key", lookup, got)
	}
	if got := planned(p, pol, t0.Add(lookup)).Action; got != payment.Lookup {
		t.Errorf("at %v: %v, want the create looked up, not repeated", lookup, got)
	}
}

func TestPlan(t *testing.T) {
	pol := testPolicy()
	window := pol.KeyWindow
	cases := []struct {
		name   string
		pay    func() *v1alpha1.Payment
		facts  payment.Facts
		now    time.Time
		action payment.Action
		at     time.Time // Wait
		check  func(t *testing.T, s payment.Step)
	}{
		{
			name: "a new payment stores the create marker before any call", pay: func() *v1alpha1.Payment { return newPay("new") },
			now: t0, action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				if s.Outcome.Status.CreateRequestedAt == nil || !s.Outcome.Status.CreateRequestedAt.Time.Equal(t0) || s.Outcome.Status.Phase != v1alpha1.PhasePending {
					t.Errorf("marker %v phase %q", s.Outcome.Status.CreateRequestedAt, s.Outcome.Status.Phase)
				}
			},
		},
		{
			name: "with the marker stored, the create goes out", pay: func() *v1alpha1.Payment {
				p := newPay("marked")
				return store(p, planned(p, pol, t0).Outcome)
			},
			now: t0, action: payment.Create,
		},
		{
			name: "a create retry waits for its time", pay: func() *v1alpha1.Payment {
				p := newPay("retry")
				p = store(p, planned(p, pol, t0).Outcome)
				return store(p, payment.AfterCreate(p, pol, fails(errNoAnswer), t0))
			},
			now: t0.Add(10 * time.Second), action: payment.Wait, at: t0.Add(30 * time.Second),
		},
		{
			name: "just inside the key window less its margin the same key is sent again", pay: func() *v1alpha1.Payment {
				p := newPay("late")
				return store(p, planned(p, pol, t0).Outcome)
			},
			now: t0.Add(window*90/100 - time.Second), action: payment.Create,
		},
		{
			name: "at the key window less its 10% margin the payment is looked up instead", pay: func() *v1alpha1.Payment {
				p := newPay("margin")
				return store(p, planned(p, pol, t0).Outcome)
			},
			now: t0.Add(window * 90 / 100), action: payment.Lookup,
		},
		{
			name: "an unpaid payment never created is closed out locally past expiresAfter, without a call", pay: func() *v1alpha1.Payment { return expiresAfter(newPay("never-created"), 30*time.Minute) },
			now: t0.Add(31 * time.Minute), action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				st := s.Outcome.Status
				if st.Phase != v1alpha1.PhaseExpired || !st.ExpiredLocally || st.CreateRequestedAt != nil || st.Query.NextTime != nil {
					t.Errorf("status %+v, want a local Expired without a marker or schedule", st)
				}
			},
		},
		{
			name: "past expiresAfter a create that may have gone out is looked up, never sent again", pay: func() *v1alpha1.Payment {
				p := expiresAfter(newPay("expired-marked"), 30*time.Minute)
				p = store(p, planned(p, pol, t0).Outcome)
				return store(p, payment.AfterCreate(p, pol, fails(errNoAnswer), t0.Add(29*time.Minute)))
			},
			now: t0.Add(31 * time.Minute), action: payment.Lookup,
		},
		{
			name: "a merchant reference owned by an older Payment is not created", pay: func() *v1alpha1.Payment { return newPay("second") },
			facts: payment.Facts{ReferenceOwner: "first"}, now: t0, action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				p := &v1alpha1.Payment{Status: s.Outcome.Status}
				if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonDuplicatePayment || p.Status.CreateRequestedAt != nil || p.Status.Query.NextTime != nil {
					t.Errorf("status %+v, want Unknown/DuplicatePayment, never marked for create", p.Status)
				}
			},
		},
		{
			name: "an idempotency key used by an older Payment is not created", pay: func() *v1alpha1.Payment {
				p := newPay("second")
				p.Spec.IdempotencyKey = "order-1001"
				return p
			},
			facts: payment.Facts{KeyOwner: "first"}, now: t0, action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				p := &v1alpha1.Payment{Status: s.Outcome.Status}
				if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonDuplicatePayment || p.Status.CreateRequestedAt != nil || p.Status.Query.NextTime != nil {
					t.Errorf("status %+v, want Unknown/DuplicatePayment, never marked for create", p.Status)
				}
				c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || !strings.Contains(c.Message, "Payment first") || !strings.Contains(c.Message, `"order-1001"`) {
					t.Errorf("review %+v, want a message naming the key and Payment first", c)
				}
			},
		},
		{
			name: "a payment waiting for a refused configuration waits while it is still refused", pay: func() *v1alpha1.Payment {
				p := created("refused")
				return store(p, payment.AfterQuery(p, pol, fails(errUnauthorized), false, t0.Add(30*time.Second)))
			},
			now: t0.Add(40 * time.Second), action: payment.Wait, at: t0.Add(90 * time.Second),
		},
		{
			name: "a payment waiting for a refused configuration goes at once when it was fixed", pay: func() *v1alpha1.Payment {
				p := created("fixed")
				return store(p, payment.AfterQuery(p, pol, fails(errUnauthorized), false, t0.Add(30*time.Second)))
			},
			facts: payment.Facts{ConfigAccepted: true}, now: t0.Add(40 * time.Second), action: payment.Query,
		},
		{
			name: "an accepted configuration does not hurry a payment waiting for an answer", pay: func() *v1alpha1.Payment {
				p := created("no-answer")
				return store(p, payment.AfterQuery(p, pol, fails(errNoAnswer), false, t0.Add(30*time.Second)))
			},
			facts: payment.Facts{ConfigAccepted: true}, now: t0.Add(40 * time.Second), action: payment.Wait, at: t0.Add(60 * time.Second),
		},
		{
			name: "a status query waits for its time", pay: func() *v1alpha1.Payment { return created("waiting") },
			now: t0.Add(10 * time.Second), action: payment.Wait, at: t0.Add(30 * time.Second),
		},
		{
			name: "a due status query goes out", pay: func() *v1alpha1.Payment { return created("due") },
			now: t0.Add(30 * time.Second), action: payment.Query,
		},
		{
			name: "a wait ends at expiresAfter for the close-out's fresh query", pay: func() *v1alpha1.Payment { return expiresAfter(created("expiring"), 10*time.Second) },
			now: t0.Add(5 * time.Second), action: payment.Wait, at: t0.Add(10 * time.Second),
		},
		{
			name: "past expiresAfter the fresh query is due at once and closes out", pay: func() *v1alpha1.Payment { return expiresAfter(created("expired"), 10*time.Second) },
			now: t0.Add(11 * time.Second), action: payment.Query,
			check: func(t *testing.T, s payment.Step) {
				if !s.CloseOut {
					t.Error("query past expiresAfter is not marked as the close-out")
				}
			},
		},
		{
			name: "no answer for maxUnreachable gives up with ProviderUnreachable, without another call", pay: func() *v1alpha1.Payment {
				p := created("unreachable")
				p = store(p, payment.AfterQuery(p, pol, fails(errNoAnswer), false, t0.Add(30*time.Second)))
				return p
			},
			now: t0.Add(30*time.Second + 72*time.Hour), action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				p := &v1alpha1.Payment{Status: s.Outcome.Status}
				if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonProviderUnreachable || p.Status.Query.NextTime != nil {
					t.Errorf("status %+v, want parked Unknown/ProviderUnreachable", p.Status)
				}
			},
		},
		{
			name: "a settled payment needs nothing", pay: func() *v1alpha1.Payment {
				p := created("settled")
				return store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, t0.Add(30*time.Second)))
			},
			now: t0.Add(time.Hour), action: payment.Nothing,
		},
		{
			name: "a settled payment stored with a schedule by an older version gets it cleared", pay: func() *v1alpha1.Payment {
				p := created("legacy")
				p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, t0.Add(30*time.Second)))
				p.Status.Query.NextTime = micro(t0.Add(time.Minute))
				return p
			},
			now: t0.Add(time.Hour), action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				if s.Outcome.Status.Query.NextTime != nil {
					t.Error("schedule kept")
				}
			},
		},
		{
			name: "a parked Unknown payment waits for a human or a final answer", pay: func() *v1alpha1.Payment {
				p := created("parked")
				return store(p, payment.AfterQuery(p, pol, fails(errNotFound), false, t0.Add(30*time.Second)))
			},
			now: t0.Add(time.Hour), action: payment.Nothing,
		},
		{
			name: "a requery annotation restarts the schedule of a parked payment", pay: func() *v1alpha1.Payment {
				p := created("requeried")
				p = store(p, payment.AfterQuery(p, pol, fails(errNotFound), false, t0.Add(30*time.Second)))
				p.Annotations = map[string]string{v1alpha1.AnnotationRequery: "1"}
				return p
			},
			now: t0.Add(time.Hour), action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				q := s.Outcome.Status.Query
				if q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(time.Hour)) || q.Attempts != 0 || s.Outcome.Status.Actions.Requery != "1" {
					t.Errorf("query %+v actions %+v", q, s.Outcome.Status.Actions)
				}
			},
		},
		{
			name: "a requery value already acted on changes nothing", pay: func() *v1alpha1.Payment {
				p := created("requeried-once")
				p.Annotations = map[string]string{v1alpha1.AnnotationRequery: "1"}
				p.Status.Actions.Requery = "1"
				return p
			},
			now: t0.Add(10 * time.Second), action: payment.Wait, at: t0.Add(30 * time.Second),
		},
		{
			name: "a resolve annotation settles a parked payment", pay: func() *v1alpha1.Payment {
				p := created("resolved")
				p = store(p, payment.AfterQuery(p, pol, fails(errNotFound), false, t0.Add(30*time.Second)))
				p.Annotations = map[string]string{v1alpha1.AnnotationResolve: "Failed", v1alpha1.AnnotationResolveReason: "OPS-1"}
				return p
			},
			now: t0.Add(time.Hour), action: payment.Write,
			check: func(t *testing.T, s payment.Step) {
				if s.Outcome.Status.Phase != v1alpha1.PhaseFailed || s.Outcome.Status.Actions.Resolve != "Failed: OPS-1" {
					t.Errorf("phase %q actions %+v", s.Outcome.Status.Phase, s.Outcome.Status.Actions)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := payment.Plan(tc.pay(), pol, tc.facts, tc.now)
			if s.Action != tc.action {
				t.Fatalf("action %s (%s), want %s", s.Action, s.Why, tc.action)
			}
			if tc.action == payment.Wait && !s.At.Equal(tc.at) {
				t.Errorf("wait until %s, want %s", s.At, tc.at)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestAfterCreate(t *testing.T) {
	pol := testPolicy()
	marked := func() *v1alpha1.Payment {
		p := newPay("order")
		return store(p, planned(p, pol, t0).Outcome)
	}
	cases := []struct {
		name       string
		call       payment.Call
		phase      v1alpha1.PaymentPhase
		id         string
		next       time.Duration // from t0; 0 = none
		failure    string
		unanswered bool
	}{
		{name: "an answer records the id and starts the schedule", call: answer(provider.StatusPending), phase: v1alpha1.PhasePending, id: "pay_1", next: 30 * time.Second},
		{name: "an answer that settles starts no schedule", call: answer(provider.StatusSucceeded), phase: v1alpha1.PhaseSucceeded, id: "pay_1"},
		{name: "no answer stays Pending and retries with the same key", call: fails(errNoAnswer), phase: v1alpha1.PhasePending, next: 30 * time.Second, unanswered: true},
		{name: "a timeout is never a failure", call: fails(errTimeout), phase: v1alpha1.PhasePending, next: 30 * time.Second, unanswered: true},
		{name: "409 same key in progress is retried", call: fails(errInProgress), phase: v1alpha1.PhasePending, next: 30 * time.Second, unanswered: true},
		{name: "Retry-After is honoured", call: fails(errThrottled), phase: v1alpha1.PhasePending, next: 90 * time.Second, unanswered: true},
		{name: "401 is a configuration problem, not a verdict", call: fails(errUnauthorized), phase: v1alpha1.PhasePending, next: time.Minute},
		{name: "403 is a configuration problem, not a verdict", call: fails(errForbidden), phase: v1alpha1.PhasePending, next: time.Minute},
		{name: "a redirect is a configuration problem, not a verdict", call: fails(errRedirect), phase: v1alpha1.PhasePending, next: time.Minute},
		{name: "a 404 on the create route is a configuration problem, not a verdict", call: fails(errNoRoute), phase: v1alpha1.PhasePending, next: time.Minute},
		{name: "a definitive refusal fails the payment", call: fails(errRefused), phase: v1alpha1.PhaseFailed, failure: v1alpha1.ReasonCreateRejected},
		{name: "an amount the provider cannot represent fails with its own code", call: fails(errAmount), phase: v1alpha1.PhaseFailed, failure: v1alpha1.ReasonAmountNotRepresentable},
		{name: "an answer without an id is retried, never recorded", call: payment.Call{Payment: provider.Payment{Status: provider.StatusPending}}, phase: v1alpha1.PhasePending, next: 30 * time.Second, unanswered: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := store(marked(), payment.AfterCreate(marked(), pol, tc.call, t0))
			st := p.Status
			if st.Phase != tc.phase || st.ProviderPaymentID != tc.id {
				t.Fatalf("phase %q id %q, want %q %q", st.Phase, st.ProviderPaymentID, tc.phase, tc.id)
			}
			if tc.next == 0 && st.Query.NextTime != nil || tc.next != 0 && (st.Query.NextTime == nil || !st.Query.NextTime.Time.Equal(t0.Add(tc.next))) {
				t.Errorf("next %v, want t0+%s", st.Query.NextTime, tc.next)
			}
			if got := ""; st.Failure != nil {
				got = st.Failure.Code
				if got != tc.failure {
					t.Errorf("failure %q, want %q", got, tc.failure)
				}
			} else if tc.failure != "" {
				t.Errorf("no failure, want %q", tc.failure)
			}
			if (st.Query.UnansweredSince != nil) != tc.unanswered {
				t.Errorf("unansweredSince %v, want set=%v", st.Query.UnansweredSince, tc.unanswered)
			}
			if st.Query.Attempts != 0 {
				t.Errorf("a create consumed %d query attempts", st.Query.Attempts)
			}
		})
	}
	t.Run("an answer after another writer recorded the id changes nothing", func(t *testing.T) {
		p := store(marked(), payment.AfterCreate(marked(), pol, answer(provider.StatusPending), t0))
		out := payment.AfterCreate(p, pol, fails(errNoAnswer), t0.Add(time.Second))
		if out.Status.Query.LastError != "" || !out.Status.Query.NextTime.Time.Equal(p.Status.Query.NextTime.Time) {
			t.Errorf("a late failed create touched a created payment: %+v", out.Status.Query)
		}
	})
}

// TestAfterLookup: past the key window (or expiresAfter) anything but a clear
// "found" ends in Unknown with CreateOutcomeUnknown, never Failed; a found
// payment always has its id recorded and its schedule started.
func TestAfterLookup(t *testing.T) {
	pol := testPolicy()
	late := t0.Add(pol.KeyWindow)
	marked := func() *v1alpha1.Payment {
		p := newPay("order")
		return store(p, planned(p, pol, t0).Outcome)
	}
	for _, tc := range []struct {
		name   string
		call   payment.Call
		phase  v1alpha1.PaymentPhase
		review string
		next   bool
	}{
		{"found pending: id recorded, schedule started", answer(provider.StatusPending), v1alpha1.PhasePending, "", true},
		{"found paid: settled", answer(provider.StatusSucceeded), v1alpha1.PhaseSucceeded, "", false},
		{"not found: create outcome unknown", fails(errNotFound), v1alpha1.PhaseUnknown, v1alpha1.ReasonCreateOutcomeUnknown, false},
		{"a provider without search: create outcome unknown", fails(errUnsupported), v1alpha1.PhaseUnknown, v1alpha1.ReasonCreateOutcomeUnknown, false},
		{"a 400 on the list route: create outcome unknown, never failed", fails(&provider.Error{Class: provider.ErrNonRetryable, StatusCode: 400}), v1alpha1.PhaseUnknown, v1alpha1.ReasonCreateOutcomeUnknown, false},
		{"a 404 on the list route: create outcome unknown, never failed", fails(&provider.Error{Class: provider.ErrNonRetryable, StatusCode: 404}), v1alpha1.PhaseUnknown, v1alpha1.ReasonCreateOutcomeUnknown, false},
		{"401 waits for the configuration fix", fails(errUnauthorized), v1alpha1.PhasePending, "", true},
		{"a redirect waits for the configuration fix", fails(errRedirect), v1alpha1.PhasePending, "", true},
		{"no answer looks again later", fails(errNoAnswer), v1alpha1.PhasePending, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := store(marked(), payment.AfterLookup(marked(), pol, tc.call, late))
			if p.Status.Phase != tc.phase || review(p) != tc.review || (p.Status.Query.NextTime != nil) != tc.next {
				t.Fatalf("phase %q review %q next %v, want %q %q next=%v", p.Status.Phase, review(p), p.Status.Query.NextTime, tc.phase, tc.review, tc.next)
			}
			if tc.call.Err == nil && p.Status.ProviderPaymentID != "pay_1" {
				t.Errorf("found id not recorded: %q", p.Status.ProviderPaymentID)
			}
		})
	}
}

func TestAfterQuery(t *testing.T) {
	pol := testPolicy()
	due := t0.Add(30 * time.Second)
	for _, tc := range []struct {
		name     string
		call     payment.Call
		phase    v1alpha1.PaymentPhase
		review   string
		attempts int32
		next     time.Duration // from due; 0 = none
	}{
		{"an answer consumes an attempt and moves to the next step", answer(provider.StatusProcessing), v1alpha1.PhaseProcessing, "", 1, time.Minute},
		{"a final answer clears the schedule in the same write", answer(provider.StatusSucceeded), v1alpha1.PhaseSucceeded, "", 1, 0},
		{"a 503 consumes no attempt and waits at the current step", fails(errNoAnswer), v1alpha1.PhasePending, "", 0, 30 * time.Second},
		{"a timeout consumes no attempt", fails(errTimeout), v1alpha1.PhasePending, "", 0, 30 * time.Second},
		{"a 429 consumes no attempt and honours Retry-After", fails(errThrottled), v1alpha1.PhasePending, "", 0, 90 * time.Second},
		{"401 consumes no attempt and settles nothing", fails(errUnauthorized), v1alpha1.PhasePending, "", 0, time.Minute},
		{"a redirect consumes no attempt and settles nothing", fails(errRedirect), v1alpha1.PhasePending, "", 0, time.Minute},
		{"404 for a payment paywarden created needs review", fails(errNotFound), v1alpha1.PhaseUnknown, v1alpha1.ReasonNonRetryableQueryError, 1, 0},
		{"a definitive refusal needs review", fails(errRefused), v1alpha1.PhaseUnknown, v1alpha1.ReasonNonRetryableQueryError, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := store(created("q"), payment.AfterQuery(created("q"), pol, tc.call, false, due))
			st := p.Status
			if st.Phase != tc.phase || review(p) != tc.review || st.Query.Attempts != tc.attempts {
				t.Fatalf("phase %q review %q attempts %d, want %q %q %d", st.Phase, review(p), st.Query.Attempts, tc.phase, tc.review, tc.attempts)
			}
			if tc.next == 0 && st.Query.NextTime != nil || tc.next != 0 && (st.Query.NextTime == nil || !st.Query.NextTime.Time.Equal(due.Add(tc.next))) {
				t.Errorf("next %v, want due+%s", st.Query.NextTime, tc.next)
			}
		})
	}

	t.Run("the schedule runs out into RetriesExhausted, parked", func(t *testing.T) {
		p := created("exhausted")
		now := t0
		for i := 0; i < len(pol.Schedule); i++ {
			now = p.Status.Query.NextTime.Time
			p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusProcessing), false, now))
		}
		if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonRetriesExhausted || p.Status.Query.NextTime != nil || p.Status.Query.Attempts != int32(len(pol.Schedule)) {
			t.Fatalf("status %+v review %q", p.Status.Query, review(p))
		}
		if s := planned(p, pol, now.Add(time.Hour)); s.Action != payment.Nothing {
			t.Errorf("exhausted payment plans %s", s.Action)
		}
	})

	// A query's write that conflicts is decided again on fresh state; a
	// payment the receiver meanwhile parked or settled is never re-armed.
	for _, tc := range []struct {
		name  string
		fresh func() *v1alpha1.Payment
	}{
		{"parked for an amount mismatch", func() *v1alpha1.Payment {
			p := created("mismatch")
			return store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedSucceeded, EventID: "evt-short", ProviderPaymentID: "pay_1", Amount: &v1alpha1.Money{Value: 999, Currency: orderCurrency}}, due))
		}},
		{"settled by a webhook", func() *v1alpha1.Payment {
			p := created("settled")
			return store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedSucceeded, EventID: "evt-paid", ProviderPaymentID: "pay_1", Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}}, due))
		}},
	} {
		for _, call := range []payment.Call{answer(provider.StatusProcessing), fails(errNoAnswer), fails(errUnauthorized), fails(errNotFound)} {
			t.Run("a re-run on a payment "+tc.name+" does not re-arm it ("+payment.Classify(call.Err).String()+")", func(t *testing.T) {
				fresh := tc.fresh()
				before := review(fresh)
				out := payment.AfterQuery(fresh, pol, call, false, due)
				p := store(fresh, out)
				if p.Status.Query.NextTime != nil {
					t.Errorf("re-armed: next %v", p.Status.Query.NextTime)
				}
				// (A settled payment counts its reads of the refunded total.)
				if got, want := p.Status.Query.Attempts, fresh.Status.Query.Attempts; !fresh.Status.Phase.IsFinal() && got != want {
					t.Errorf("attempts %d, want %d: a payment parked meanwhile has no schedule to consume", got, want)
				}
				if review(p) != before || p.Status.Phase != fresh.Status.Phase {
					t.Errorf("phase %q review %q, want %q %q kept", p.Status.Phase, review(p), fresh.Status.Phase, before)
				}
			})
		}
	}
}

// providerScript answers the n-th call of an action at now.
type providerScript func(action payment.Action, n int, now time.Time) payment.Call

type callLog struct {
	action payment.Action
	at     time.Time
	class  payment.ErrorClass
}

// drive is the reconciler's loop over the pure core, with I/O replaced by a
// script and time by a fake clock that jumps to every wake-up. It checks the
// loop's own rules on the way: every call leads to a stored change, and no
// wake-up lies in the past.
func drive(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, script providerScript, until time.Time) (*v1alpha1.Payment, []callLog) {
	t.Helper()
	clk := clocktesting.NewFakeClock(p.CreationTimestamp.Time)
	var calls []callLog
	counts := map[payment.Action]int{}
	fresh := false // an operation stored by this "reconcile" and not called yet
	for i := 0; i < 100000 && !clk.Now().After(until); i++ {
		now := clk.Now()
		s := payment.Plan(p, pol, payment.Facts{FreshOperation: fresh}, now)
		switch s.Action {
		case payment.Nothing:
			return p, calls
		case payment.Wait:
			if !s.At.After(now) {
				t.Fatalf("wait until %s at %s: a hot loop", s.At, now)
			}
			clk.SetTime(s.At)
			continue
		case payment.Write:
			next := store(p, s.Outcome)
			if equalStatus(p, next) {
				t.Fatalf("a Write step that changes nothing at %s (%s)", now, s.Why)
			}
			fresh = next.Status.Operation != nil && (p.Status.Operation == nil || !p.Status.Operation.RequestedAt.Equal(&next.Status.Operation.RequestedAt))
			p = next
			continue
		}
		fresh = false
		call := script(s.Action, counts[s.Action], now)
		counts[s.Action]++
		if traceDrive {
			t.Logf("%s %s (%s) -> %v [attempts %d phase %s op %v]", now.Format(time.TimeOnly), s.Action, s.Why, payment.Classify(call.Err), p.Status.Query.Attempts, p.Status.Phase, p.Status.Operation != nil)
		}
		calls = append(calls, callLog{action: s.Action, at: now, class: payment.Classify(call.Err)})
		out, ok := afterCall(p, pol, s, call, now)
		if !ok {
			t.Fatalf("unexpected action %s", s.Action)
		}
		next := store(p, out)
		if equalStatus(p, next) {
			t.Fatalf("%s at %s answered %v changed nothing: the reconciler would call again at once", s.Action, now, call.Err)
		}
		p = next
		if again := payment.Plan(p, pol, payment.Facts{}, now); again.Action == payment.Create || again.Action == payment.Lookup || again.Action == payment.Query {
			t.Fatalf("after %s at %s (%v) another call is due at once: %s (%s)\nbefore %+v\nafter %+v", s.Action, now, call.Err, again.Action, again.Why, p.Status, next.Status)
		}
	}
	return p, calls
}

// afterCall hands a call's answer to the After function of the call Plan
// asked for; ok is false for a step that makes no call.
func afterCall(p *v1alpha1.Payment, pol payment.Policy, s payment.Step, call payment.Call, now time.Time) (out payment.Outcome, ok bool) {
	switch s.Action {
	case payment.Create:
		return payment.AfterCreate(p, pol, call, now), true
	case payment.Lookup:
		return payment.AfterLookup(p, pol, call, now), true
	case payment.Query:
		return payment.AfterQuery(p, pol, call, s.CloseOut, now), true
	case payment.CallAuthorize, payment.CallCapture, payment.CallCancel:
		return payment.AfterOperation(p, pol, payment.OperationOf(s.Action), call, now), true
	}
	return payment.Outcome{}, false
}

// traceDrive logs every call drive makes (set it while debugging a seed).
var traceDrive = false

func equalStatus(a, b *v1alpha1.Payment) bool {
	return sameStatus(&a.Status, &b.Status)
}

func count(calls []callLog, action payment.Action) int {
	n := 0
	for _, c := range calls {
		if c.action == action {
			n++
		}
	}
	return n
}

func TestScenarioHappyPathQueryFirst(t *testing.T) {
	pol := testPolicy()
	p, calls := drive(t, newPay("happy"), pol, func(a payment.Action, n int, _ time.Time) payment.Call {
		if a == payment.Create {
			return answer(provider.StatusPending)
		}
		if n == 0 {
			return answer(provider.StatusProcessing)
		}
		return answer(provider.StatusSucceeded)
	}, t0.Add(24*time.Hour))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Query.NextTime != nil {
		t.Fatalf("phase %q next %v", p.Status.Phase, p.Status.Query.NextTime)
	}
	if count(calls, payment.Create) != 1 || count(calls, payment.Query) != 2 || len(calls) != 3 {
		t.Errorf("calls %+v, want 1 create and 2 queries", calls)
	}
}

// TestScenarioLongOutageConsumesNoAttempts is defect 3: 20 Processing
// payments against a provider that answers 503 for 3 hours all settle when it
// is back, none exhausted by failed probes.
func TestScenarioLongOutageConsumesNoAttempts(t *testing.T) {
	pol := testPolicy()
	outageEnd := t0.Add(3 * time.Hour)
	for i := 0; i < 20; i++ {
		p, calls := drive(t, newPay(fmt.Sprintf("outage-%d", i)), pol, func(a payment.Action, n int, now time.Time) payment.Call {
			switch {
			case a == payment.Create:
				return answer(provider.StatusPending)
			case now.Before(outageEnd):
				return fails(errNoAnswer)
			}
			return answer(provider.StatusSucceeded)
		}, t0.Add(24*time.Hour))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" {
			t.Fatalf("%s: phase %q review %q after the outage, want Succeeded", p.Name, p.Status.Phase, review(p))
		}
		if p.Status.Query.Attempts > 1 {
			t.Errorf("%s: %d attempts consumed, want only the answer's", p.Name, p.Status.Query.Attempts)
		}
		// During the outage the payment waited at its step (30s), not faster.
		for j := 1; j < len(calls); j++ {
			if gap := calls[j].at.Sub(calls[j-1].at); calls[j].action == payment.Query && gap < 30*time.Second {
				t.Fatalf("%s: queries %s apart during the outage", p.Name, gap)
			}
		}
	}
}

func TestScenarioOutageLongerThanMaxUnreachableGivesUp(t *testing.T) {
	pol := testPolicy()
	pol.Schedule = []time.Duration{30 * time.Second, time.Hour}
	p, calls := drive(t, newPay("gone"), pol, func(a payment.Action, _ int, _ time.Time) payment.Call {
		if a == payment.Create {
			return answer(provider.StatusPending)
		}
		return fails(errTimeout)
	}, t0.Add(10*24*time.Hour))
	if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonProviderUnreachable || p.Status.Query.NextTime != nil {
		t.Fatalf("phase %q review %q next %v", p.Status.Phase, review(p), p.Status.Query.NextTime)
	}
	last := calls[len(calls)-1].at
	if gaveUpAfter := last.Sub(t0); gaveUpAfter < pol.MaxUnreachable-time.Minute || gaveUpAfter > pol.MaxUnreachable+time.Minute {
		t.Errorf("last call %s after the start, want about maxUnreachable (%s)", gaveUpAfter, pol.MaxUnreachable)
	}
}

// TestScenarioRequeryOnCreateOutcomeUnknownLooksUpOnce is defect 1: a requery
// of a payment whose create could not be resolved makes exactly one lookup
// per schedule step, and a found id is recorded and starts the schedule.
func TestScenarioRequeryOnCreateOutcomeUnknownLooksUpOnce(t *testing.T) {
	pol := testPolicy()
	// Creates that never get an answer: the same key until the window less
	// its margin, then lookups; still Pending (no answer is no verdict).
	p, calls := drive(t, newPay("lost"), pol, func(a payment.Action, _ int, _ time.Time) payment.Call {
		return fails(errNoAnswer)
	}, t0.Add(pol.KeyWindow+time.Hour))
	if p.Status.Phase != v1alpha1.PhasePending || review(p) != "" {
		t.Fatalf("unanswered creates: phase %q review %q, want Pending", p.Status.Phase, review(p))
	}
	switchAt := t0.Add(pol.LookupAfter())
	for _, c := range calls {
		if (c.action == payment.Create) == !c.at.Before(switchAt) {
			t.Fatalf("%s at %s: creates must stop, and lookups start, at %s", c.action, c.at, switchAt)
		}
	}

	p = newPay("unfindable")
	p, _ = drive(t, p, pol, func(a payment.Action, _ int, _ time.Time) payment.Call {
		if a == payment.Create {
			return fails(errNoAnswer)
		}
		return fails(errNotFound)
	}, t0.Add(pol.KeyWindow+time.Hour))
	if review(p) != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Fatalf("setup: review %q", review(p))
	}
	for _, tc := range []struct {
		name    string
		lookup  payment.Call
		lookups int
		phase   v1alpha1.PaymentPhase
		id      string
	}{
		{"not found again: one lookup, parked again", fails(errNotFound), 1, v1alpha1.PhaseUnknown, ""},
		{"no search at this provider: one lookup, parked again", fails(errUnsupported), 1, v1alpha1.PhaseUnknown, ""},
		{"found still pending: id recorded, then queried to the end", answer(provider.StatusPending), 1, v1alpha1.PhaseSucceeded, "pay_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p.DeepCopy()
			q.Annotations = map[string]string{v1alpha1.AnnotationRequery: "now"}
			q.CreationTimestamp = metav1.NewTime(t0.Add(pol.KeyWindow + 2*time.Hour))
			got, calls := drive(t, q, pol, func(a payment.Action, _ int, _ time.Time) payment.Call {
				if a == payment.Lookup {
					return tc.lookup
				}
				return answer(provider.StatusSucceeded)
			}, q.CreationTimestamp.Add(48*time.Hour))
			if n := count(calls, payment.Lookup); n != tc.lookups {
				t.Errorf("%d lookups, want %d", n, tc.lookups)
			}
			if count(calls, payment.Create) != 0 {
				t.Error("a create went out past the key window")
			}
			if got.Status.Phase != tc.phase || got.Status.ProviderPaymentID != tc.id {
				t.Errorf("phase %q id %q, want %q %q", got.Status.Phase, got.Status.ProviderPaymentID, tc.phase, tc.id)
			}
		})
	}
}

// TestScenarioConfigurationProblemsNeverSettle is defect 6: a bad key
// rotation leaves every payment in its phase, however long it lasts, and
// work resumes once the provider answers again.
func TestScenarioConfigurationProblemsNeverSettle(t *testing.T) {
	pol := testPolicy()
	fixed := t0.Add(5 * time.Hour)
	for _, err := range []error{errUnauthorized, errForbidden, errRedirect, errNoRoute} {
		p, calls := drive(t, newPay("rotated"), pol, func(a payment.Action, _ int, now time.Time) payment.Call {
			if now.Before(fixed) {
				return fails(err)
			}
			if a == payment.Create {
				return answer(provider.StatusPending)
			}
			return answer(provider.StatusSucceeded)
		}, t0.Add(24*time.Hour))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" || p.Status.Failure != nil {
			t.Fatalf("%v: phase %q review %q failure %+v", err, p.Status.Phase, review(p), p.Status.Failure)
		}
		if n := count(calls, payment.Create); n < 2 {
			t.Errorf("%v: %d creates, want retries with the same key", err, n)
		}
		if count(calls, payment.Lookup) != 0 {
			t.Errorf("%v: looked up although the key window has not passed", err)
		}
	}
}

func TestReferenceOwner(t *testing.T) {
	at := func(name string, offset time.Duration, phase v1alpha1.PaymentPhase) v1alpha1.Payment {
		return placed(name, "ORD-1", "", offset, phase)
	}
	first, second := at("first", 0, v1alpha1.PhasePending), at("second", time.Second, "")
	twin := at("a-twin", time.Second, "")
	failed := at("declined", -time.Hour, v1alpha1.PhaseFailed)
	expired := at("abandoned", -time.Hour, v1alpha1.PhaseExpired)
	canceled := at("withdrawn", -time.Hour, v1alpha1.PhaseCanceled)
	other := at("other-provider", -time.Hour, v1alpha1.PhasePending)
	other.Spec.ProviderRef.Name = "paypal"
	all := []v1alpha1.Payment{first, second, twin, failed, expired, canceled, other}
	checkOwners(t, "owner", payment.ReferenceOwner, all, []ownerCase{
		{first, ""},
		{second, "first"},
		{twin, "first"},
	})
	// An order whose payment ended without taking money (declined, expired
	// unpaid, canceled) may be paid again under the same reference (SPEC §12.1).
	for _, ended := range []v1alpha1.Payment{failed, expired, canceled} {
		if got := payment.ReferenceOwner(&second, []v1alpha1.Payment{ended, second}); got != "" {
			t.Errorf("the order's retry after a %s payment is owned by %q: parked as DuplicatePayment", ended.Status.Phase, got)
		}
	}
	// Two created in the same second: the name decides, the same way for both.
	if got := payment.ReferenceOwner(&second, []v1alpha1.Payment{second, twin}); got != "a-twin" {
		t.Errorf("same second: owner %q, want a-twin", got)
	}
	if got := payment.ReferenceOwner(&twin, []v1alpha1.Payment{second, twin}); got != "" {
		t.Errorf("same second: a-twin owned by %q", got)
	}
}

// ownerCase is a payment and the payment that owns its merchant reference or
// key, "" for itself.
type ownerCase struct {
	p    v1alpha1.Payment
	want string
}

// checkOwners checks owner's answer (ReferenceOwner or KeyOwner) for each
// case among all.
func checkOwners(t *testing.T, what string, owner func(*v1alpha1.Payment, []v1alpha1.Payment) string, all []v1alpha1.Payment, cases []ownerCase) {
	t.Helper()
	for _, tc := range cases {
		if got := owner(&tc.p, all); got != tc.want {
			t.Errorf("%s: %s %q, want %q", tc.p.Name, what, got, tc.want)
		}
	}
}

// placed is a payment of order ref (spec.merchantReference) under
// spec.idempotencyKey key ("" for the default one), created offset after t0
// and now in phase.
func placed(name, ref, key string, offset time.Duration, phase v1alpha1.PaymentPhase) v1alpha1.Payment {
	p := newPay(name)
	p.Spec.MerchantReference, p.Spec.IdempotencyKey = ref, key
	p.CreationTimestamp = metav1.NewTime(t0.Add(offset))
	p.Status.Phase = phase
	return *p
}

// TestKeyOwner: a user-set spec.idempotencyKey is unique among the Payments
// of a provider like a merchant reference (SPEC §12.1), but a key is never
// released: the provider replays whatever answered it first, so a second
// Payment under it would be given the first one's payment.
func TestKeyOwner(t *testing.T) {
	at := func(name, key string, offset time.Duration, phase v1alpha1.PaymentPhase) v1alpha1.Payment {
		return placed(name, "ORD-"+name, key, offset, phase) // the references differ: only the key is shared
	}
	first, second := at("first", "key-1", 0, v1alpha1.PhasePending), at("second", "key-1", time.Second, "")
	twin := at("a-twin", "key-1", time.Second, "")
	other := at("other-key", "key-2", -time.Hour, v1alpha1.PhasePending)
	otherProvider := at("other-provider", "key-1", -time.Hour, v1alpha1.PhasePending)
	otherProvider.Spec.ProviderRef.Name = "paypal"
	defaulted, defaultedToo := at("defaulted", "", -time.Hour, v1alpha1.PhasePending), at("defaulted-too", "", 0, "")
	all := []v1alpha1.Payment{first, second, twin, other, otherProvider, defaulted, defaultedToo}
	checkOwners(t, "key owner", payment.KeyOwner, all, []ownerCase{
		{first, ""},
		{second, "first"},
		{twin, "first"},
		{other, ""},
		{otherProvider, ""},
		{defaultedToo, ""}, // a default key is not checked here
	})
	for _, phase := range []v1alpha1.PaymentPhase{v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled} {
		ended := at("ended", "key-1", -time.Hour, phase)
		if got := payment.KeyOwner(&second, []v1alpha1.Payment{ended, second}); got != "ended" {
			t.Errorf("a %s Payment's key: owner %q, want it kept by the ended Payment", phase, got)
		}
	}
	// Two created in the same second: the name decides, the same way for both.
	if got := payment.KeyOwner(&second, []v1alpha1.Payment{second, twin}); got != "a-twin" {
		t.Errorf("same second: owner %q, want a-twin", got)
	}
	if got := payment.KeyOwner(&twin, []v1alpha1.Payment{second, twin}); got != "" {
		t.Errorf("same second: a-twin owned by %q", got)
	}
}

// TestLoopProperties drives random payments through random provider
// behaviour — answers of every status, every error class, webhooks between
// calls, operator requeries — and checks the loop's rules at every step
// (drive's own checks) and at the end: a settled payment has no schedule, no
// payment is failed except by the provider's refusal or failure, attempts
// never exceed the schedule.
func TestLoopProperties(t *testing.T) {
	r, seed := propRand(t)
	statuses := []provider.Status{provider.StatusPending, provider.StatusProcessing, provider.StatusSucceeded, provider.StatusFailed, provider.StatusExpired, provider.StatusUnknown, provider.StatusRefund,
		provider.StatusApproved, provider.StatusAuthorized, provider.StatusCanceled}
	errs := []error{nil, nil, nil, errNoAnswer, errTimeout, errThrottled, errInProgress, errUnauthorized, errRedirect, errNotFound, errRefused, errUnsupported}
	runs := propCount(300)
	for i := 0; i < runs; i++ {
		pol := testPolicy()
		pol.JitterPercent = 10
		pol.Lifecycle = provider.Lifecycle{Checkout: true, StoredMethod: true, ManualCapture: true, PartialCapture: true, AuthorizeStep: r.Intn(2) == 0, Cancel: true, Refunds: true}
		pol.LifecycleKnown = true
		p := newPay(fmt.Sprintf("random-%d", i))
		if r.Intn(2) == 0 {
			p.Spec.CaptureMethod = v1alpha1.CaptureManual
		}
		if r.Intn(3) == 0 {
			p.Spec.ExpiresAfter = &metav1.Duration{Duration: time.Duration(1+r.Intn(120)) * time.Minute}
		}
		if r.Intn(4) == 0 {
			p.Spec.ProviderPaymentID = "pay_1"
		}
		refusedCreate, providerFailed := false, false
		script := func(a payment.Action, _ int, now time.Time) payment.Call {
			err := errs[r.Intn(len(errs))]
			if err != nil {
				if a == payment.Create && payment.Classify(err) == payment.Refused {
					refusedCreate = true
				}
				return fails(err)
			}
			st := statuses[r.Intn(len(statuses))]
			if st == provider.StatusFailed {
				providerFailed = true
			}
			c := answer(st)
			c.Payment.RefundedTotal = int64(r.Intn(orderValue + 1))
			return c
		}
		// Between runs of the loop: a webhook or an operator, sometimes.
		until := t0.Add(time.Duration(1+r.Intn(96)) * time.Hour)
		for leg := 0; leg < 3; leg++ {
			p, _ = drive(t, p, pol, script, until)
			switch r.Intn(3) {
			case 0:
				st := statuses[r.Intn(len(statuses))]
				if st == provider.StatusFailed {
					providerFailed = true
				}
				obs := payment.FromEvent(provider.Event{ID: fmt.Sprintf("evt-%d", r.Intn(5)), Status: st, PaymentID: "pay_1", Amount: orderValue, Currency: orderCurrency, RefundedTotal: 500}, v1alpha1.ViaWebhook)
				p = store(p, payment.ApplyEvent(p, obs, until))
			case 1:
				key := []string{v1alpha1.AnnotationRequery, v1alpha1.AnnotationCapture, v1alpha1.AnnotationCancel}[r.Intn(3)]
				value := fmt.Sprint(leg)
				if key == v1alpha1.AnnotationCapture && r.Intn(2) == 0 {
					value = fmt.Sprint(1 + r.Intn(orderValue*2))
				}
				p.Annotations = map[string]string{key: value}
			}
			p.CreationTimestamp = metav1.NewTime(until) // drive restarts its clock here
			until = until.Add(time.Duration(1+r.Intn(96)) * time.Hour)
		}
		st := p.Status
		if st.Phase.IsFinal() && (st.Query.NextTime != nil || st.Query.UnansweredSince != nil) {
			t.Fatalf("seed %d run %d: settled %s with a schedule %+v", seed, i, st.Phase, st.Query)
		}
		if st.Phase == v1alpha1.PhaseFailed && !refusedCreate && !providerFailed {
			t.Fatalf("seed %d run %d: Failed without a refusal or a provider failure: %+v", seed, i, st.History)
		}
		if int(st.Query.Attempts) > len(pol.Schedule) {
			t.Fatalf("seed %d run %d: %d attempts for a schedule of %d; history %s", seed, i, st.Query.Attempts, len(pol.Schedule), dumpHistory(st.History))
		}
		if st.Phase == v1alpha1.PhaseUnknown && review(p) == "" {
			t.Fatalf("seed %d run %d: Unknown without review", seed, i)
		}
	}
}

func dumpHistory(h []v1alpha1.HistoryEntry) string {
	var b strings.Builder
	for _, e := range h {
		fmt.Fprintf(&b, "\n  %s %s -> %s via %s %s", e.Time.Format(time.TimeOnly), e.From, e.To, e.Source, e.Reason)
	}
	return b.String()
}
