package generic_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a create or refund the provider
// accepted (202) whose answer cannot be read (cut short, or JSON without the job or
// refund) is "it happened, look it up": Retryable with ErrUnreadableAnswer (the
// core's NoAnswer), never a refusal and never an empty answer taken for the job.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	paysimtest.EachGarbledBody(t, 2, func(t *testing.T, body string) *paysim.Sim {
		srv, a := simAdapter(t, paysim.Options{})
		g := paysimtest.Garbler{Sim: srv.Sim, Body: body}

		g.Next(paysim.OpCreate)
		_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: key("ref"), Amount: 1000, Currency: "USD", Checkout: &provider.Checkout{ReturnURL: "https://shop.example/r"}})
		g.Want(t, "create", err)

		p := paidJob(t, srv, a, 1000)
		g.Next(paysim.OpRefund)
		_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "USD"})
		g.Want(t, "refund", err)

		return srv.Sim
	})
}

// TestAnAnswerPaywardenCannotStoreIsUnreadable: a job or refund whose currency
// is not three letters A-Z (once a lower-case code is read as upper case), or
// a payer's link that expires outside the years 0000-9999 in UTC, cannot be
// written to a status. Such an answer is ErrUnreadableAnswer (Retryable: the
// outcome is unknown, the job is read again), never a payment taken as it
// is, whose every status write the API server refuses.
func TestAnAnswerPaywardenCannotStoreIsUnreadable(t *testing.T) {
	job := func(fields string) http.HandlerFunc {
		return providertest.Answer(http.StatusOK, "application/json", `{"jobId":"job_1","correlationId":"ref-1",`+fields+`}`)
	}
	refund := providertest.Answer(http.StatusAccepted, "application/json", `{"refundId":"rf_1","jobId":"job_1","refundStatus":"processing","amount":{"value":300,"currency":"US"}}`)
	get := func(a *generic.Adapter) error { _, err := a.Get(ctx, "job_1"); return err }
	calls := []struct {
		name string
		call func(a *generic.Adapter) error
		h    http.HandlerFunc
	}{
		{"get: a currency of two letters", get, job(`"jobStatus":"processing","amount":{"value":1999,"currency":"US"}`)},
		{"get: a received amount in a currency with a digit", get,
			job(`"jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"},"amountReceived":{"value":1999,"currency":"U5D"}`)},
		{"get: the payer's link expires in the year 10000 in UTC", get,
			job(`"jobStatus":"processing","amount":{"value":1999,"currency":"USD"},"action":{"url":"https://pay.example/a","expiresAt":"9999-12-31T23:00:00-02:00"}`)},
		{"create", func(a *generic.Adapter) error {
			_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref-1", Amount: 1999, Currency: "USD"})
			return err
		}, job(`"jobStatus":"processing","amount":{"value":1999,"currency":"dollar"}`)},
		{"find", func(a *generic.Adapter) error { _, err := a.FindByMerchantReference(ctx, "ref-1"); return err },
			providertest.Answer(http.StatusOK, "application/json", `{"items":[{"jobId":"job_1","correlationId":"ref-1","jobStatus":"succeeded","amount":{"value":1999,"currency":"US"}}]}`)},
		{"create refund", func(a *generic.Adapter) error {
			_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: "job_1", IdempotencyKey: "k", Reference: "ns.rf", Amount: 300, Currency: "USD"})
			return err
		}, refund},
		{"get refund", func(a *generic.Adapter) error { _, err := a.GetRefund(ctx, "job_1", "rf_1"); return err }, refund},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(serve(t, c.h))
			if !errors.Is(err, provider.ErrUnreadableAnswer) {
				t.Fatalf("err = %v, want ErrUnreadableAnswer", err)
			}
			providertest.AssertClass(t, err, provider.ErrRetryable)
		})
	}
	t.Run("a currency in lower case is read as its ISO code", func(t *testing.T) {
		p, err := serve(t, job(`"jobStatus":"processing","amount":{"value":1999,"currency":"usd"}`)).Get(ctx, "job_1")
		if err != nil || p.Currency != "USD" {
			t.Fatalf("%+v, %v: want USD", p, err)
		}
	})
}
