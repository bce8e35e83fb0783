package generic_test

import (
	"testing"
	"time"

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
	providertest.SetAside(t, page, err, "msg_1", "msg_2", "c2")
}
