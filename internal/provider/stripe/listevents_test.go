package stripe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestListEventsSetsAsideAnUnreadableEvent: a listed payment_intent event
// whose object names no payment intent is not an event paywarden can read;
// the page keeps the others and the next page starts after it (Stripe pages
// with starting_after=<the last event id of the page>), so it stops nothing
// behind it.
func TestListEventsSetsAsideAnUnreadableEvent(t *testing.T) {
	good := `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","created":1767225600,"data":{"object":{"id":"pi_1","object":"payment_intent","amount":1000,"amount_received":1000,"currency":"usd","status":"succeeded"}}}`
	bad := `{"id":"evt_2","object":"event","type":"payment_intent.succeeded","created":1767225599,"data":{"object":{}}}`
	a := serve(t, stripeAnswer(200, `{"object":"list","url":"/v1/events","data":[`+good+`,`+bad+`],"has_more":true}`))
	page, err := a.ListEvents(ctx, time.Unix(1767220000, 0), "")
	providertest.SetAside(t, page, err, "evt_1", "evt_2", "evt_2")

	// More after a page that names no id to go on from is an error, never
	// the end of the run: Stripe lists newest first, and the run's end moves
	// the cursor past the older events not read yet.
	a = serve(t, stripeAnswer(200, `{"object":"list","url":"/v1/events","data":[{"object":"event"}],"has_more":true}`))
	if page, err := a.ListEvents(ctx, time.Unix(1767220000, 0), "evt_0"); !errors.Is(err, provider.ErrNonRetryable) {
		t.Fatalf("%+v %v, want ErrNonRetryable", page, err)
	}
}
