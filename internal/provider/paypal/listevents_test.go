package paypal_test

import (
	"errors"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
)

// TestListEventsSetsAsideAnUnreadableEvent: a listed capture event whose
// resource carries no id and names no order is not an event paywarden can
// read; the page keeps the others and its next link, so it stops nothing
// behind it.
func TestListEventsSetsAsideAnUnreadableEvent(t *testing.T) {
	bad := `{"id":"WH-BAD","create_time":"2026-09-21T11:30:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"status":"COMPLETED"}}`
	a := fakeAdapter(t, &fakePayPal{token: issueToken, api: answer(200, `{"events":[`+bad+`,`+webhookEvent+`],"count":2,`+
		`"links":[{"href":"https://api-m.paypal.example/v1/notifications/webhooks-events/?page_size=100&move_to=next&index_id=3","rel":"next","method":"GET"}]}`)})
	page, err := a.ListEvents(ctx, parseTime(t, "2026-09-21T10:00:00Z"), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].Type != "PAYMENT.CAPTURE.COMPLETED" || len(page.Unreadable) != 1 || page.Unreadable[0].ID != "WH-BAD" ||
		!errors.Is(page.Unreadable[0].Err, provider.ErrMalformedEvent) || !page.HasMore || page.NextCursor == "" {
		t.Fatalf("%+v", page)
	}
}
