package generic_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider/generic"
)

// TestALookupByReferenceDoesNotTakeAnEarlierAttemptsJob: an order may be paid
// again after its first attempt failed (SPEC §12.1: Failed releases the
// merchant reference), so the async-job API holds two jobs with the same
// correlationId. When the retry's create answer is lost and its key window
// has passed, paywarden looks the order up by correlationId (SPEC §2.3); the
// first job listed is the earlier attempt's.
//
//  1. Payment order-1-a (merchantReference order-1) made job_1; it failed.
//  2. Payment order-1-b, a new attempt at order-1, marks its create and sends
//     POST /jobs with its own key; the job (job_2) is made and charges, but the
//     answer is lost. Every retry gets no answer until the key window less its
//     margin (21.6 h) has passed.
//  3. The lookup GET /jobs?correlationId=order-1 lists job_1 (failed) and
//     job_2 (succeeded).
//  4. Taking the first, order-1-b would record job_1 as its own and settle
//     Failed: job_2's charge lost from view, the merchant reference released
//     again, and the next attempt charging the payer a second time.
//
// SPEC §2.3 (past the key window the payment is looked up; anything but a clear
// "found" is Unknown + CreateOutcomeUnknown, never Failed), §11.3 ("Past the key
// window, any lookup failure that is not a clear 'found' ends Unknown +
// CreateOutcomeUnknown, never Failed"), §11.4 (one payment per order). A job
// submitted before the retry's create was even marked cannot be its answer.
//
// Correct: the lookup finds this attempt's job (job_2), or, when it cannot
// tell the jobs apart, ends Unknown + CreateOutcomeUnknown; never another
// attempt's job and never Failed from it.
func TestALookupByReferenceDoesNotTakeAnEarlierAttemptsJob(t *testing.T) {
	marked := time.Date(2026, 9, 20, 12, 0, 0, 0, time.UTC)
	a := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/jobs" || r.URL.Query().Get("correlationId") != "order-1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[` +
			`{"jobId":"job_1","correlationId":"order-1","jobStatus":"failed","processingStage":"authorization","amount":{"value":1999,"currency":"USD"},` +
			`"failure":{"code":"card_declined","message":"declined"},"submittedAt":"2026-09-20T10:00:00Z","completedAt":"2026-09-20T10:00:05Z"},` +
			`{"jobId":"job_2","correlationId":"order-1","jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"},` +
			`"amountReceived":{"value":1999,"currency":"USD"},"submittedAt":"2026-09-20T12:00:01Z","completedAt":"2026-09-20T12:00:09Z"}]}`))
	})
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Name: "order-1-b", Namespace: "shop", UID: "uid-b", CreationTimestamp: metav1.NewTime(marked.Add(-time.Second))},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: "gen"},
			Amount:            v1alpha1.Amount{Value: 1999, Currency: "USD"},
			MerchantReference: "order-1",
		},
	}
	p.Status.Phase = v1alpha1.PhasePending
	p.Status.CreateRequestedAt = &metav1.Time{Time: marked}
	p.Status.IdempotencyKey = p.IdempotencyKey()

	spec := &v1alpha1.PaymentProviderSpec{}
	pol := payment.PolicyFor(spec).WithCapabilities(spec, generic.Capabilities())
	now := marked.Add(23 * time.Hour) // past the key window less its margin
	if s := payment.Plan(p, pol, payment.Facts{}, now); s.Action != payment.Lookup {
		t.Fatalf("setup: step %s (%s), want the lookup by merchant reference", s.Action, s.Why)
	}
	found, err := a.FindByMerchantReference(context.Background(), p.MerchantRef())
	out := payment.AfterLookup(p, pol, payment.Call{Payment: found, Err: err}, now)
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionNeedsReview); out.Status.Phase != v1alpha1.PhaseUnknown || c == nil || c.Reason != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Errorf("the retry's lookup found two jobs of its order: phase %s, review %+v; want Unknown + CreateOutcomeUnknown", out.Status.Phase, c)
	}
	if out.Status.ProviderPaymentID == "job_1" || out.Status.Phase == v1alpha1.PhaseFailed {
		t.Fatalf("the retry order-1-b took the earlier attempt's job: providerPaymentID %q, phase %s (failure %+v); "+
			"its own job job_2 (submitted after its create marker) took the payer's money",
			out.Status.ProviderPaymentID, out.Status.Phase, out.Status.Failure)
	}
}
