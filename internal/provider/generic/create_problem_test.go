package generic_test

import (
	"context"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestACreateProblemNamingAJobStillUndecidedDoesNotFailThePayment: the async-job
// API answers POST /jobs with an RFC 9457 problem that names the job it made
// (jobId) and says that job is not decided (jobStatus "unknown" or
// "processing"), with retryable:false ("do not send this again: query the job").
//
//  1. paywarden marks the create and sends POST /jobs with its key.
//  2. The API answers 500 application/problem+json {jobId, jobStatus, processingStage,
//     retryable:false}: the job exists and may still charge.
//  3. Read as a refusal (retryable:false beats the 5xx), the core would settle
//     the payment Failed (CreateRejected), release its merchant reference and
//     never query the job. The adapter answers with the job instead: the
//     payment records job_7 and queries it.
//
// Violates SPEC §4 generic ("`unknown` is not final: keep querying, then Unknown"),
// §11.3 ("Only a definitive decline or validation answer about the payment itself
// fails it"), §2.3 (only a definitive 4xx rejection fails a create) and seed 003
// (retryable:false means stop blind retries; a job reported failed/undecided with
// retryable:false goes to manual review, the jobId is what the status is queried by).
// A Failed payment releases the merchant reference (§12.1), so the order can be
// charged again by a new Payment while this job goes on to take the money.
func TestACreateProblemNamingAJobStillUndecidedDoesNotFailThePayment(t *testing.T) {
	for _, jobStatus := range []string{"unknown", "processing"} {
		t.Run(jobStatus, func(t *testing.T) {
			out, err := createAnswered(t, problemAnswer(500, `{"type":"https://api.example/problems/settlement-timeout","title":"Settlement did not answer in time",`+
				`"status":500,"jobId":"job_7","correlationId":"ns.order-1","jobStatus":"`+jobStatus+`","processingStage":"settlement","retryable":false}`))
			if out.Status.ProviderPaymentID != "job_7" || out.Status.Phase.IsFinal() || out.Status.Query.NextTime == nil {
				t.Errorf("the create answered with job job_7 %s: providerPaymentID %q, phase %s, next query %v; want job_7 followed by status queries",
					jobStatus, out.Status.ProviderPaymentID, out.Status.Phase, out.Status.Query.NextTime)
			}
			if out.Status.Phase == v1alpha1.PhaseFailed {
				t.Fatalf("the create was answered with job job_7 %s (retryable:false, err %v) and the payment was settled Failed (%+v): "+
					"a job that exists and is not decided must be followed (queried by its jobId, or looked up), never failed", jobStatus, err, out.Status.Failure)
			}
		})
	}
}

// TestACreateProblemNamingAJobThatTookTheMoneyDoesNotFailThePayment: the
// async-job API refuses a create with a problem that names the job it made
// and says that job already took the money (jobStatus succeeded, or
// partially_refunded / refunded).
//
//  1. paywarden marks the create and sends POST /jobs with its key; the answer
//     is lost, the job j7 is made and charges.
//  2. The create is sent again with its key; the API answers 422
//     application/problem+json {jobId: j7, jobStatus: succeeded,
//     retryable:false} ("this correlation id already has a job: query it").
//  3. Read as a refusal, AfterCreate would settle the payment Failed
//     (CreateRejected) and release its merchant reference, so the order
//     would be paid again by a new Payment: charged twice, and j7's money
//     never seen.
//
// SPEC §11.3 (only a definitive decline or validation answer about the
// payment itself fails it), §2.3, §12.1 (Failed releases the merchant
// reference; an order is charged once). The create is answered with the job
// it names, whatever it says of it, unless that job is failed or expired.
func TestACreateProblemNamingAJobThatTookTheMoneyDoesNotFailThePayment(t *testing.T) {
	for _, jobStatus := range []string{"succeeded", "partially_refunded", "refunded"} {
		t.Run(jobStatus, func(t *testing.T) {
			out, err := createAnswered(t, problemAnswer(422, `{"type":"https://api.example/problems/duplicate-correlation-id","title":"A job with this correlationId exists",`+
				`"status":422,"jobId":"job_7","correlationId":"ns.order-1","jobStatus":"`+jobStatus+`","retryable":false}`))
			if out.Status.Phase == v1alpha1.PhaseFailed {
				t.Fatalf("the create was answered with job job_7 %s (retryable:false, err %v) and the payment was settled Failed (%+v), releasing its merchant reference: "+
					"the job took the money; it must be followed by its jobId, never failed", jobStatus, err, out.Status.Failure)
			}
		})
	}
}

// TestACreateProblemNamingAFailedJobIsARefusal: a create refused with a
// problem that names its job as failed (or expired) is the refusal it says:
// the job took no money, and the payment fails with the problem's reason.
func TestACreateProblemNamingAFailedJobIsARefusal(t *testing.T) {
	for _, jobStatus := range []string{"failed", "expired"} {
		t.Run(jobStatus, func(t *testing.T) {
			a := serve(t, problemAnswer(422, `{"type":"https://api.example/problems/card-declined","title":"Card declined",`+
				`"status":422,"jobId":"job_8","jobStatus":"`+jobStatus+`","retryable":false}`))
			_, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ns.order-2", Amount: 1999, Currency: "USD"})
			providertest.AssertClass(t, err, provider.ErrNonRetryable)
		})
	}
}
