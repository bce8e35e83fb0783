package provider

import (
	"encoding/json"
	"errors"
	"fmt"
)

// UnreadableEvent is an entry of an events page that is not an event
// paywarden can read (ErrMalformedEvent: no id or type, no object, an object
// that names no payment). The page goes on without it: one bad entry must not
// stop every later event of the provider from being read. The backfill
// reports each one (a Warning Event and the count in its condition).
type UnreadableEvent struct {
	// ID is the entry's "id" when it has one that is a string, else "".
	ID  string
	Err error
}

// ReadEvents reads the raw entries of one events page with parse (an
// adapter's ParseEvent), in order. An entry parse refuses as ErrMalformedEvent
// is returned in unreadable; any other error ends the read. last is the id of
// the page's last entry that has one, readable or not, so a cursor of the
// form "after <id>" passes the unreadable ones too.
func ReadEvents(raws []json.RawMessage, parse func([]byte) (Event, error)) (events []Event, unreadable []UnreadableEvent, last string, err error) {
	for _, raw := range raws {
		ev, err := parse(raw)
		switch {
		case err == nil:
			events = append(events, ev)
			last = ev.ID
		case errors.Is(err, ErrMalformedEvent):
			id := entryID(raw)
			unreadable = append(unreadable, UnreadableEvent{ID: id, Err: err})
			if id != "" {
				last = id
			}
		default:
			return nil, nil, "", err
		}
	}
	return events, unreadable, last, nil
}

// entryID is raw's top-level "id" when it is a JSON object with a string
// id, else "".
func entryID(raw []byte) string {
	var e struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return ""
	}
	id, _ := e.ID.(string)
	return id
}

// ContinueAfter is the cursor of the page after one of n entries whose last
// id is last, at a provider that pages with "after <event id>" (KukoPay's and
// Stripe's starting_after); "" when nothing follows. It is an error when more
// follow but the page names no id past cursor, the one it was read after:
// asked again, the provider would answer the same page.
func ContinueAfter(hasMore bool, n int, last, cursor string) (string, error) {
	if !hasMore || n == 0 {
		return "", nil
	}
	if last == "" || last == cursor {
		return "", fmt.Errorf("%w: a page of %d entries with more after it names no event id past %q to continue after", ErrMalformedEvent, n, cursor)
	}
	return last, nil
}
