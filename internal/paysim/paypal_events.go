package paysim

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// PayPal's webhook events list, GET /v1/notifications/webhooks-events (PayPal
// REST API reference, "Webhooks Management API v1", "List event
// notifications"): query page_size (default 10), start_time and end_time (RFC
// 3339, "created on or after" / "on or before"), event_type ("a single
// event"); the answer is {events, count, links}, each event the webhook event
// object, and the next page is the link with rel "next", whose query carries
// move_to=next, index_time and index_id besides the filters (the reference's
// sample answer). Every event paysim records is listed, delivered or lost.
//
// What the reference leaves open, paysim assumes and docs/providers.md says:
//   - order: newest first. The reference does not say; its sample answer, a
//     page of 2 of a window from 2014-08-04 to 2014-09-18, links the next
//     page at index_time 2014-09-17T23:07:35Z, a day before the window's end:
//     the first page held the window's newest events. Events with one
//     create_time are listed in the reverse of the order they happened.
//   - retention: PayPalEventRetention. The API reference names none; the
//     dashboard over the same events lists "the last 30 days" (PayPal
//     developer docs, "Webhooks Events dashboard": "The range must be in the
//     last 30 days").
//   - page size: at most paypalEventsMaxPage. The reference names no maximum
//     and says "the response might have fewer items than the requested
//     page_size value".
//   - transaction_id is not modelled: paysim refuses it rather than ignore a
//     filter a test may rely on.

// PayPalEventRetention is how far back paysim lists PayPal webhook events.
const PayPalEventRetention = 30 * 24 * time.Hour

const (
	paypalEventsPath        = "/v1/notifications/webhooks-events"
	paypalEventsDefaultPage = 10
	paypalEventsMaxPage     = 100
)

// paypalEventsQuery is a parsed GET /v1/notifications/webhooks-events.
type paypalEventsQuery struct {
	pageSize   int
	start, end time.Time // zero: open
	eventType  string
	// after is the position of the last event of the previous page (its
	// index_time and index_id); nil for the first page.
	after *paypalEventPos
}

// paypalEventPos is an event's place in the newest-first order: its creation
// time, then its position among the events paysim recorded.
type paypalEventPos struct {
	created time.Time
	seq     int
}

// before reports whether p comes after o in the newest-first order.
func (p paypalEventPos) before(o paypalEventPos) bool {
	return p.created.Before(o.created) || p.created.Equal(o.created) && p.seq < o.seq
}

func (s *Sim) paypalEvents(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	q, err := parsePayPalEventsQuery(r.URL.Query())
	if err != nil {
		s.writeError(w, PayPal, http.StatusBadRequest, "VALIDATION_ERROR", err.Error(), nil, 0)
		return
	}
	s.mu.Lock()
	s.counters.EventListCalls++
	page, next := s.paypalEventsPageLocked(q)
	s.mu.Unlock()
	out := paypal.EventList{Events: append([]json.RawMessage{}, page...), Count: len(page)}
	if next != nil {
		out.Links = append(out.Links, paypal.Link{Href: baseURL(r) + "/" + PayPal + paypalEventsPath + "?" + q.nextQuery(*next).Encode(), Rel: paypal.RelNext, Method: http.MethodGet})
	}
	writeJSON(w, http.StatusOK, out)
}

func parsePayPalEventsQuery(v url.Values) (paypalEventsQuery, error) {
	q := paypalEventsQuery{pageSize: paypalEventsDefaultPage, eventType: v.Get("event_type")}
	if v.Get("transaction_id") != "" {
		return q, errors.New("paysim does not model transaction_id")
	}
	if ps := v.Get("page_size"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			return q, errors.New("page_size must be a positive integer")
		}
		q.pageSize = min(n, paypalEventsMaxPage)
	}
	var err error
	if q.start, err = optionalTime(v, "start_time"); err != nil {
		return q, err
	}
	if q.end, err = optionalTime(v, "end_time"); err != nil {
		return q, err
	}
	if v.Get("move_to") == "next" {
		pos := paypalEventPos{}
		if pos.created, err = time.Parse(time.RFC3339Nano, v.Get("index_time")); err != nil {
			return q, errors.New("index_time must be an RFC 3339 time")
		}
		if pos.seq, err = strconv.Atoi(v.Get("index_id")); err != nil {
			return q, errors.New("index_id must be an integer")
		}
		q.after = &pos
	}
	return q, nil
}

// optionalTime parses the RFC 3339 time of query parameter name; zero when
// it is absent.
func optionalTime(v url.Values, name string) (time.Time, error) {
	if v.Get(name) == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v.Get(name))
	if err != nil {
		return t, errors.New(name + " must be an RFC 3339 time")
	}
	return t, nil
}

// nextQuery is the query of the link to the page after the event at pos.
func (q paypalEventsQuery) nextQuery(pos paypalEventPos) url.Values {
	v := url.Values{
		"page_size": {strconv.Itoa(q.pageSize)}, "move_to": {"next"},
		"index_time": {pos.created.UTC().Format(time.RFC3339Nano)}, "index_id": {strconv.Itoa(pos.seq)},
	}
	for name, t := range map[string]time.Time{"start_time": q.start, "end_time": q.end} {
		if !t.IsZero() {
			v.Set(name, t.UTC().Format(time.RFC3339))
		}
	}
	if q.eventType != "" {
		v.Set("event_type", q.eventType)
	}
	return v
}

// paypalEventsPageLocked is the page q asks for, newest first, and the
// position of its last event when more follow; s.mu held. The deadlines that
// passed are applied first, so the events they send are listed.
func (s *Sim) paypalEventsPageLocked(q paypalEventsQuery) (page []json.RawMessage, next *paypalEventPos) {
	for _, p := range s.payments[PayPal] {
		s.refreshLocked(p)
	}
	retained := s.now().Add(-PayPalEventRetention)
	var listed []paypalEventPos
	for i, e := range s.events[PayPal] {
		pos := paypalEventPos{created: e.Created, seq: i}
		created := e.Created.Truncate(time.Second) // create_time has seconds
		switch {
		case e.Created.Before(retained), created.Before(q.start.Truncate(time.Second)),
			!q.end.IsZero() && created.After(q.end), q.eventType != "" && e.Type != q.eventType,
			q.after != nil && !pos.before(*q.after):
			continue
		}
		listed = append(listed, pos)
	}
	slices.SortFunc(listed, func(a, b paypalEventPos) int {
		return cmp.Or(b.created.Compare(a.created), cmp.Compare(b.seq, a.seq))
	})
	for i, pos := range listed {
		if i == q.pageSize {
			return page, &listed[i-1]
		}
		page = append(page, s.events[PayPal][pos.seq].Raw)
	}
	return page, nil
}
