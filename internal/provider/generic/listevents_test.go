package generic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestListEventsSetsAsideAnUnreadableEvent: an event of the list whose data
// names no job is not an event paywarden can read; the page keeps the others
// and its cursor, so it stops nothing behind it.
func TestListEventsSetsAsideAnUnreadableEvent(t *testing.T) {
	good := `{"id":"msg_1","type":"job.succeeded","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"job_1","correlationId":"ref-1","jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"}}}`
	bad := `{"id":"msg_2","type":"job.succeeded","timestamp":"2026-09-21T12:00:01Z","data":{"jobStatus":"succeeded"}}`
	a := providertest.Serve(t, providertest.Answer(200, "application/json", `{"events":[`+bad+`,`+good+`],"nextCursor":"c2","hasMore":true}`), newAdapter)
	page, err := a.ListEvents(ctx, time.Unix(1758450000, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].ID != "msg_1" || len(page.Unreadable) != 1 || page.Unreadable[0].ID != "msg_2" ||
		!errors.Is(page.Unreadable[0].Err, provider.ErrMalformedEvent) || page.NextCursor != "c2" || !page.HasMore {
		t.Fatalf("%+v", page)
	}
}
