package generic_test

import (
	"context"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestFindByMerchantReferenceTakesOnlyItsOwnJob: the search by correlationId
// filters again on its answer. An API that ignored the parameter would
// otherwise hand back another order's job, and the payment would adopt a
// payment it did not make.
func TestFindByMerchantReferenceTakesOnlyItsOwnJob(t *testing.T) {
	list := `{"items":[` +
		`{"jobId":"job_other","correlationId":"ORD-2","jobStatus":"succeeded","amount":{"value":500,"currency":"USD"}},` +
		`{"jobId":"job_mine","correlationId":"ORD-1","jobStatus":"processing","amount":{"value":1999,"currency":"USD"}}]}`
	got, err := serve(t, providertest.Answer(200, "application/json", list)).FindByMerchantReference(context.Background(), "ORD-1")
	if err != nil || got.ID != "job_mine" {
		t.Fatalf("found %q (%v), want job_mine", got.ID, err)
	}
	only := `{"items":[{"jobId":"job_other","correlationId":"ORD-2","jobStatus":"succeeded","amount":{"value":500,"currency":"USD"}}]}`
	got, err = serve(t, providertest.Answer(200, "application/json", only)).FindByMerchantReference(context.Background(), "ORD-1")
	if err == nil {
		t.Fatalf("found %q for ORD-1 among another order's jobs", got.ID)
	}
	providertest.AssertClass(t, err, provider.ErrNotFound)
}

// TestASucceededJobReportsWhatItReceived: a job that succeeded (or was
// refunded since) reports amountReceived as the payment's amount: a partial
// settlement received less than was asked, and refunds are bounded by it. A
// job still processing reports the amount asked.
func TestASucceededJobReportsWhatItReceived(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
	}{
		{"succeeded", 1500},
		{"refunded", 1500},
		{"processing", 1999},
	} {
		j := generic.Job{JobID: "job_1", CorrelationID: "ORD-1", JobStatus: tc.status,
			Amount: generic.Amount{Value: 1999, Currency: "USD"}, AmountReceived: &generic.Amount{Value: 1500, Currency: "USD"}}
		if got, err := j.Normalize(); err != nil || got.Amount != tc.want || got.Currency != "USD" {
			t.Errorf("%s job: amount %d %s (%v), want %d USD", tc.status, got.Amount, got.Currency, err, tc.want)
		}
	}
}

// TestGenericCapabilities pins what the generic API can do: an events API
// (the backfill), a search by correlationId (the look-up that replaces a
// create past its key window), the payer's checkout page and refunds; no
// capture, cancel or refund search.
func TestGenericCapabilities(t *testing.T) {
	c := generic.Capabilities()
	if !c.EventsAPI || !c.LookupByReference || !c.Lifecycle.Checkout || !c.Lifecycle.Refunds {
		t.Errorf("capabilities %+v: want the events API, the search by reference, checkout and refunds", c)
	}
	if c.Lifecycle.ManualCapture || c.Lifecycle.Cancel || c.Lifecycle.RefundLookup {
		t.Errorf("capabilities %+v: the generic API has no capture, cancel or refund search", c)
	}
}
