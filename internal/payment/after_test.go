package payment_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestWaitingForTheMerchantsCaptureConsumesNoAttempt: a Manual payment waits
// in Authorized for the merchant's capture, however long; the status queries
// made meanwhile (for a void or an expiry) consume no schedule attempt, so a
// capture after more queries than the schedule has steps is followed through
// to its end, not parked in Unknown/RetriesExhausted (SPEC §11.2, §11.5).
func TestWaitingForTheMerchantsCaptureConsumesNoAttempt(t *testing.T) {
	pol := testPolicy()
	p := authorizedPay("long-wait", v1alpha1.CaptureManual)
	if p.Status.Phase != v1alpha1.PhaseAuthorized || p.Status.Query.NextTime == nil {
		t.Fatalf("fixture: phase %s next %v", p.Status.Phase, p.Status.Query.NextTime)
	}
	attempts := p.Status.Query.Attempts
	now := p.Status.Query.NextTime.Time
	for i := 0; i < 3*len(pol.Schedule); i++ {
		if s := payment.Plan(p, pol, payment.Facts{}, now); s.Action != payment.Query {
			t.Fatalf("wait %d: step %s (%s), want a status query", i, s.Action, s.Why)
		}
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusAuthorized), false, now))
		if p.Status.Phase != v1alpha1.PhaseAuthorized || review(p) != "" {
			t.Fatalf("wait %d: phase %s review %q", i, p.Status.Phase, review(p))
		}
		if p.Status.Query.Attempts != attempts {
			t.Fatalf("wait %d: status.query.attempts %d, want %d: waiting for the merchant consumed an attempt", i, p.Status.Query.Attempts, attempts)
		}
		if p.Status.Query.NextTime == nil {
			t.Fatalf("wait %d: no next query while waiting", i)
		}
		now = p.Status.Query.NextTime.Time
	}

	// The merchant captures; the provider holds the capture as pending for a
	// while, then settles it.
	p = annotate(p, v1alpha1.AnnotationCapture, "all")
	s := payment.Plan(p, pol, payment.Facts{}, now)
	if s.Action != payment.Write || s.Outcome.Status.Operation == nil {
		t.Fatalf("capture: step %s (%s)", s.Action, s.Why)
	}
	p = store(p, s.Outcome)
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture {
		t.Fatalf("capture: step %s (%s), want the call", s.Action, s.Why)
	}
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, answer(provider.StatusProcessing), now))
	if p.Status.Phase != v1alpha1.PhaseProcessing {
		t.Fatalf("after the capture call: phase %s", p.Status.Phase)
	}
	for i := 0; i < 2; i++ {
		now = p.Status.Query.NextTime.Time
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusProcessing), false, now))
		if p.Status.Phase != v1alpha1.PhaseProcessing || review(p) != "" || p.Status.Query.NextTime == nil {
			t.Fatalf("capture pending, query %d: phase %s review %q attempts %d: the wait for the capture used up the schedule",
				i, p.Status.Phase, review(p), p.Status.Query.Attempts)
		}
	}
	now = p.Status.Query.NextTime.Time
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, now))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" {
		t.Fatalf("captured: phase %s review %q", p.Status.Phase, review(p))
	}
}

// While the merchant's capture is awaited, the next look is the schedule's
// last step, or a second after the authorization (or the funds' guarantee)
// ends if that comes first: one that has already ended brings nothing
// forward.
func TestWaitingForTheMerchantLooksAgainJustAfterTheAuthorizationEnds(t *testing.T) {
	pol := testPolicy()
	for _, tc := range []struct {
		name               string
		expires, funds     time.Duration // from now; 0: not known
		expiresWithinLast  time.Duration // expires this long before the last step would end
		wantFromNow        time.Duration // 0: the schedule's last step
		lastStepLongerThan time.Duration
	}{
		{name: "nothing ends: the last step"},
		{name: "the authorization ends first", expires: 5 * time.Minute, wantFromNow: 5*time.Minute + time.Second, lastStepLongerThan: 5 * time.Minute},
		{name: "the funds' guarantee ends first", expires: 5 * time.Minute, funds: 2 * time.Minute, wantFromNow: 2*time.Minute + time.Second, lastStepLongerThan: 5 * time.Minute},
		{name: "an authorization that already ended brings nothing forward", expires: -time.Minute},
		{name: "an authorization ending within a second of the last step: the last step", expiresWithinLast: 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := authorizedPay("lapse", v1alpha1.CaptureManual)
			now := p.Status.Query.NextTime.Time
			last, _ := payment.Delay(pol.Schedule, pol.JitterPercent, int32(len(pol.Schedule)-1), string(p.UID))
			if last <= tc.lastStepLongerThan {
				t.Fatalf("fixture: last step %s, want longer than %s", last, tc.lastStepLongerThan)
			}
			if tc.expiresWithinLast != 0 {
				tc.expires = last - tc.expiresWithinLast
			}
			if tc.expires != 0 {
				at := metav1.NewTime(now.Add(tc.expires))
				p.Status.AuthorizationExpiresAt = &at
			}
			if tc.funds != 0 {
				at := metav1.NewTime(now.Add(tc.funds))
				p.Status.FundsGuaranteedUntil = &at
			}
			p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusAuthorized), false, now))
			want := now.Add(last)
			if tc.wantFromNow != 0 {
				want = now.Add(tc.wantFromNow)
			}
			if next := p.Status.Query.NextTime; p.Status.Phase != v1alpha1.PhaseAuthorized || next == nil || !next.Time.Equal(want) {
				t.Fatalf("phase %s next %v, want Authorized and the next look at %s", p.Status.Phase, next, want)
			}
		})
	}
}

// Errors no adapter classified: a bug, or a context error that escaped the
// adapter's classification.
var unclassifiedErrors = map[string]error{
	"a bare error":                     errors.New("boom"),
	"an escaped context deadline":      context.DeadlineExceeded,
	"a wrapped context cancellation":   fmt.Errorf("get payment: %w", context.Canceled),
	"an error wrapping nothing at all": fmt.Errorf("unexpected response %d", 418),
}

// TestUnclassifiedErrorsNeverSettle: an error no adapter classified means
// "no answer" everywhere: it never fails, expires or parks a payment or a
// Refund, never consumes a schedule attempt and never ends an operation
// (SPEC §11.2, §11.3; STYLE: transient errors never set a final phase).
func TestUnclassifiedErrorsNeverSettle(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Refunds: true, ManualCapture: true}, true
	for name, err := range unclassifiedErrors {
		t.Run(name, func(t *testing.T) {
			if c := payment.Classify(err); c != payment.NoAnswer {
				t.Errorf("Classify = %s, want no_answer", c)
			}
			t.Run("create", func(t *testing.T) {
				p := newPay("create")
				p = store(p, planned(p, pol, t0).Outcome)
				p = store(p, payment.AfterCreate(p, pol, fails(err), t0))
				st := p.Status
				if st.Phase != v1alpha1.PhasePending || st.Failure != nil || review(p) != "" || st.Query.NextTime == nil || st.Query.LastErrorClass != "NoAnswer" {
					t.Fatalf("phase %s failure %+v review %q next %v class %q", st.Phase, st.Failure, review(p), st.Query.NextTime, st.Query.LastErrorClass)
				}
				if s := payment.Plan(p, pol, payment.Facts{}, st.Query.NextTime.Time); s.Action != payment.Create {
					t.Fatalf("then: %s (%s), want the same create again", s.Action, s.Why)
				}
			})
			t.Run("lookup", func(t *testing.T) {
				p := newPay("lookup")
				p = store(p, planned(p, pol, t0).Outcome)
				late := t0.Add(pol.LookupAfter())
				p = store(p, payment.AfterLookup(p, pol, fails(err), late))
				if p.Status.Phase != v1alpha1.PhasePending || review(p) != "" || p.Status.Query.NextTime == nil {
					t.Fatalf("phase %s review %q next %v", p.Status.Phase, review(p), p.Status.Query.NextTime)
				}
			})
			t.Run("query", func(t *testing.T) {
				p := created("query")
				now := p.Status.Query.NextTime.Time
				for i := 0; i < 2*len(pol.Schedule); i++ {
					p = store(p, payment.AfterQuery(p, pol, fails(err), false, now))
					st := p.Status
					if st.Phase != v1alpha1.PhasePending || review(p) != "" || st.Query.Attempts != 0 || st.Query.NextTime == nil {
						t.Fatalf("query %d: phase %s review %q attempts %d next %v", i, st.Phase, review(p), st.Query.Attempts, st.Query.NextTime)
					}
					now = st.Query.NextTime.Time
				}
			})
			for _, kind := range []v1alpha1.OperationKind{v1alpha1.OperationCapture, v1alpha1.OperationCancel} {
				t.Run(string(kind), func(t *testing.T) {
					p := authorizedPay("op", v1alpha1.CaptureManual)
					if kind == v1alpha1.OperationCapture {
						p = annotate(p, v1alpha1.AnnotationCapture, "all")
					} else {
						p = annotate(p, v1alpha1.AnnotationCancel, "changed their mind")
					}
					p = store(p, payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Minute)).Outcome)
					p = store(p, payment.AfterOperation(p, pol, kind, fails(err), t0.Add(time.Minute)))
					st := p.Status
					if st.Phase != v1alpha1.PhaseAuthorized || review(p) != "" || st.Operation == nil || st.Operation.Kind != kind || st.Operation.RetryAt == nil {
						t.Fatalf("phase %s review %q operation %+v: the %s's outcome is unknown, it must be looked up and repeated", st.Phase, review(p), st.Operation, kind)
					}
					// The lookup of its outcome fails the same way: still nothing decided.
					p = store(p, payment.AfterQuery(p, pol, fails(err), false, st.Operation.RetryAt.Time))
					if p.Status.Phase != v1alpha1.PhaseAuthorized || review(p) != "" || p.Status.Operation == nil {
						t.Fatalf("after the lookup: phase %s review %q operation %+v", p.Status.Phase, review(p), p.Status.Operation)
					}
				})
			}
			t.Run("refund create", func(t *testing.T) {
				r := newRefundMarked(pol, payment.RefundFacts{Payment: paidPayment(0)})
				out := payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: err}, t0)
				if out.Status.Phase != v1alpha1.RefundPending || out.Status.Failure != nil || out.Status.Query.NextTime == nil {
					t.Fatalf("refund %+v", out.Status)
				}
			})
			t.Run("refund lookup", func(t *testing.T) {
				r := newRefundMarked(pol, payment.RefundFacts{Payment: paidPayment(0)})
				out := payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: err}, t0.Add(pol.LookupAfter()))
				if out.Status.Phase != v1alpha1.RefundPending || refundReview(&out.Status) != "" || out.Status.Query.NextTime == nil {
					t.Fatalf("refund %+v", out.Status)
				}
			})
			t.Run("refund query", func(t *testing.T) {
				r := newRefundMarked(pol, payment.RefundFacts{Payment: paidPayment(0)})
				r.Status = payment.AfterRefundCreate(r, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundPending, Amount: 500, Currency: orderCurrency}}, t0).Status
				now := r.Status.Query.NextTime.Time
				for i := 0; i < 2*len(pol.Schedule); i++ {
					r.Status = payment.AfterRefundQuery(r, pol, payment.RefundCall{Err: err}, now).Status
					st := r.Status
					if st.Phase.IsFinal() || st.Phase == v1alpha1.RefundUnknown || st.Query.Attempts != 0 || st.Query.NextTime == nil {
						t.Fatalf("query %d: refund %s review %q attempts %d", i, st.Phase, refundReview(&st), st.Query.Attempts)
					}
					now = st.Query.NextTime.Time
				}
			})
		})
	}
}
