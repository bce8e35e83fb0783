package paypal_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// TestListEventsSetsAsideAnUnreadableEvent: a listed capture event whose
// resource carries no id and names no order is not an event paywarden can
// read; the page keeps the others and its next link, so it stops nothing
// behind it.
func TestListEventsSetsAsideAnUnreadableEvent(t *testing.T) {
	bad := `{"id":"WH-BAD","create_time":"2026-09-21T11:30:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"status":"COMPLETED"}}`
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/oauth2/token" {
			_, _ = io.WriteString(w, `{"access_token":"tok","token_type":"Bearer","expires_in":3600}`)
			return
		}
		_, _ = io.WriteString(w, `{"events":[`+bad+`,`+webhookEvent+`],"count":2,`+
			`"links":[{"href":"https://api-m.paypal.example/v1/notifications/webhooks-events/?page_size=100&move_to=next&index_id=3","rel":"next","method":"GET"}]}`)
	}))
	t.Cleanup(api.Close)
	a, err := paypal.New(provider.Config{Name: "ns/pp", APIURL: api.URL, Timeout: time.Second, Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("s")}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := a.ListEvents(ctx, parseTime(t, "2026-09-21T10:00:00Z"), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].Type != "PAYMENT.CAPTURE.COMPLETED" || len(page.Unreadable) != 1 || page.Unreadable[0].ID != "WH-BAD" ||
		!errors.Is(page.Unreadable[0].Err, provider.ErrMalformedEvent) || !page.HasMore || page.NextCursor == "" {
		t.Fatalf("%+v", page)
	}
}
