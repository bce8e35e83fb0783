package kukopay_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

const listedEvent = `{"id":"evt_1","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_1","out_trade_no":"ORD-1","amount":1000,"amount_received":1000,"currency":"CNY","status":"succeeded"}}}`

// TestListEventsSetsAsideAnUnreadableEvent: an event of the list that names no
// payment is not an event paywarden can read; the page keeps the others and
// the next page starts after it, so it stops nothing behind it.
func TestListEventsSetsAsideAnUnreadableEvent(t *testing.T) {
	bad := `{"id":"evt_2","type":"payment.succeeded","created":1758456001,"data":{"object":{"status":"succeeded"}}}`
	a := providertest.Serve(t, providertest.Answer(200, "application/json", `{"object":"list","data":[`+listedEvent+`,`+bad+`],"has_more":true}`), newAdapter)
	page, err := a.ListEvents(ctx, time.Unix(1758450000, 0), "")
	providertest.SetAside(t, page, err, "evt_1", "evt_2", "evt_2")

	// A page with more after it but no id to go on from is an error: asked
	// after the same id, the provider would answer the same page.
	a = providertest.Serve(t, providertest.Answer(200, "application/json", `{"object":"list","data":[{"type":"x"}],"has_more":true}`), newAdapter)
	if page, err := a.ListEvents(ctx, time.Unix(1758450000, 0), "evt_0"); !errors.Is(err, provider.ErrNonRetryable) {
		t.Fatalf("%+v %v, want ErrNonRetryable", page, err)
	}
}
