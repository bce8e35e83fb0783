package generic_test

// The generic adapter's reading of RFC 9457 problem answers to
// money-moving calls (create, refund) that say "retryable": false.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
)

// createAnswered sends the create of a marked 19.99 USD Payment "order-1"
// to an API answering h, and returns what the core makes of the answer, and
// the adapter's error.
func createAnswered(t *testing.T, h http.HandlerFunc) (payment.Outcome, error) {
	t.Helper()
	now := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Name: "order-1", Namespace: "ns", UID: "uid-1", CreationTimestamp: metav1.NewTime(now.Add(-time.Second))},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "gen"},
			Amount:      v1alpha1.Amount{Value: 1999, Currency: "USD"},
		},
	}
	p.Status.Phase = v1alpha1.PhasePending
	p.Status.CreateRequestedAt = &metav1.Time{Time: now}
	p.Status.IdempotencyKey = p.IdempotencyKey()
	pp, err := serve(t, h).Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: payment.CreateKey(p), MerchantReference: p.MerchantRef(), Amount: 1999, Currency: "USD",
	})
	pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{}).WithCapabilities(&v1alpha1.PaymentProviderSpec{}, generic.Capabilities())
	return payment.AfterCreate(p, pol, payment.Call{Payment: pp, Err: err}, now.Add(time.Second)), err
}

// TestCreateServerErrorThatSaysDoNotRetryIsNotARefusal: POST /jobs is
// answered 500/502/503 application/problem+json with "retryable": false and no
// jobId. A 5xx says nothing about whether the job was made and charged: it is
// no "definitive decline or validation answer about the payment itself"
// (SPEC §11.3), and a non-retryable error stops automatic retries for a
// human, never fails the payment. The payment must not be settled Failed
// (that would release its merchant reference while the job may hold the
// money): the create stays unanswered, retried with its key.
func TestCreateServerErrorThatSaysDoNotRetryIsNotARefusal(t *testing.T) {
	for _, status := range []int{500, 502, 503} {
		t.Run("HTTP_"+strconv.Itoa(status), func(t *testing.T) {
			out, err := createAnswered(t, problemAnswer(status, `{"type":"https://api.example/problems/settlement-failure","title":"Settlement stage failed",`+
				`"status":`+strconv.Itoa(status)+`,"correlationId":"ns.order-9","processingStage":"settlement","retryable":false}`))
			if out.Status.Phase == v1alpha1.PhaseFailed {
				t.Fatalf("HTTP %d with retryable:false (class %v) settled the payment Failed (%+v): a server error says nothing "+
					"about whether the job was made; it must stay unsettled (NoAnswer / looked up / Unknown for review), never Failed",
					status, payment.Classify(err), out.Status.Failure)
			}
		})
	}
}

// TestCreateKeyConflictProblemIsNotARefusal: POST /jobs answered 409
// problem "a request with this Idempotency-Key is still being processed"
// (IETF draft-ietf-httpapi-idempotency-key-header, "Error Scenarios") with
// retryable:false ("do not resend"). The original request may still charge:
// a key conflict concerns that one call, is never a verdict, and the call's
// outcome is looked up (SPEC §12.1; §11.3: a 409 on create is retryable).
func TestCreateKeyConflictProblemIsNotARefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"409 original request still processing, retryable false", 409, `{"type":"https://api.example/problems/idempotency-key-in-use","title":"A request with this Idempotency-Key is still being processed","status":409,"retryable":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := createAnswered(t, problemAnswer(tc.status, tc.body))
			if out.Status.Phase == v1alpha1.PhaseFailed {
				t.Fatalf("HTTP %d idempotency-key problem (class %v) settled the payment Failed (%+v): the key's first request may have charged; "+
					"a key conflict is never a verdict (want KeyConflict, looked up)", tc.status, payment.Classify(err), out.Status.Failure)
			}
		})
	}
}

// TestRefundServerErrorThatSaysDoNotRetryIsNotARefusal: POST
// /jobs/{id}/refunds answered 503 problem retryable:false. The refund may
// have been made: read as a refusal, the core would settle the Refund Failed
// (CreateRejected), and an operator told the refund failed would refund
// again. It stays retryable (outcome unknown).
func TestRefundServerErrorThatSaysDoNotRetryIsNotARefusal(t *testing.T) {
	a := serve(t, problemAnswer(503, `{"title":"Refund ledger unavailable","status":503,"jobId":"job_7","processingStage":"refund","retryable":false}`))
	_, err := a.CreateRefund(context.Background(), provider.RefundRequest{
		PaymentID: "job_7", IdempotencyKey: "rk-1", Reference: "ns.refund-1", Amount: 500, Currency: "USD",
	})
	if c := payment.Classify(err); c == payment.Refused {
		now := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
		r := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Name: "refund-1", Namespace: "ns", UID: "ruid-1"}}
		r.Status.CreateRequestedAt = &metav1.Time{Time: now}
		pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{}).WithCapabilities(&v1alpha1.PaymentProviderSpec{}, generic.Capabilities())
		out := payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: err}, now.Add(time.Second))
		t.Fatalf("a 503 to a refund (retryable:false) is class %v (err %v); the core makes the Refund %q (failure %+v): "+
			"the refund may have been made, it must not be settled Failed", c, err, out.Status.Phase, out.Status.Failure)
	}
	if !errors.Is(err, provider.ErrRetryable) {
		t.Errorf("class of a 503 to a refund: %v, want retryable (outcome unknown)", err)
	}
}
