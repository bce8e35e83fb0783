package generic_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/provider/generic"
)

// TestEventPaymentIDIsTheJobID: for every event type paywarden acts on, PaymentID is the
// jobId Create returned, never the event's own id (which the core would take for a
// second payment of the same order).
func TestEventPaymentIDIsTheJobID(t *testing.T) {
	const job = "job_Z8xY7wV6uT5sR4qP3o2n"
	statusOf := map[string]string{
		"job.processing": "processing", "job.succeeded": "succeeded", "job.failed": "failed",
		"job.expired": "expired", "job.refunded": "partially_refunded", "job.disputed": "succeeded",
		"job.refund_failed": "succeeded",
	}
	for typ := range generic.EventStatuses() {
		t.Run(typ, func(t *testing.T) {
			st, ok := statusOf[typ]
			if !ok {
				t.Fatalf("supported event type %s has no payment id case", typ)
			}
			raw := `{"id":"msg_1","type":"` + typ + `","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"` + job + `","correlationId":"ref-1","jobStatus":"` + st + `","amount":{"value":1999,"currency":"USD"}}}`
			ev, err := generic.ParseEvent([]byte(raw))
			if err != nil || !ev.Supported {
				t.Fatalf("%+v %v", ev, err)
			}
			if ev.PaymentID != job || ev.MerchantReference != "ref-1" {
				t.Fatalf("PaymentID %q, MerchantReference %q", ev.PaymentID, ev.MerchantReference)
			}
		})
	}
	t.Run("an event without a jobId has none, not the event id", func(t *testing.T) {
		ev, err := generic.ParseEvent([]byte(`{"id":"msg_2","type":"job.succeeded","timestamp":"2026-09-21T12:00:00Z","data":{"correlationId":"ref-1","jobStatus":"succeeded"}}`))
		if err != nil || ev.PaymentID != "" {
			t.Fatalf("PaymentID %q %v", ev.PaymentID, err)
		}
	})
}
