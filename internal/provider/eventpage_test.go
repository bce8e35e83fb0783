package provider_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
)

// parseTest reads {"id":..,"ok":true} as an event, {"ok":false} as malformed
// and {"fail":true} as another error.
func parseTest(raw []byte) (provider.Event, error) {
	var e struct {
		ID   string `json:"id"`
		OK   bool   `json:"ok"`
		Fail bool   `json:"fail"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return provider.Event{}, provider.MalformedEvent("not JSON", err)
	}
	switch {
	case e.Fail:
		return provider.Event{}, errors.New("boom")
	case !e.OK || e.ID == "":
		return provider.Event{}, provider.MalformedEvent("not ok", nil)
	}
	return provider.Event{ID: e.ID}, nil
}

func raws(entries ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		out[i] = json.RawMessage(e)
	}
	return out
}

// TestReadEventsGoesOnPastUnreadableEntries: an entry that is not an event
// (ErrMalformedEvent) is set aside with its id, if it has one as a string,
// and the page goes on; the last id is the page's last one, readable or not,
// so "after <id>" paging passes it. Any other error ends the page.
func TestReadEventsGoesOnPastUnreadableEntries(t *testing.T) {
	for _, c := range []struct {
		name           string
		page           []json.RawMessage
		events, unread []string
		last           string
	}{
		{name: "every entry readable", page: raws(`{"id":"e1","ok":true}`, `{"id":"e2","ok":true}`), events: []string{"e1", "e2"}, last: "e2"},
		{name: "an unreadable entry between", page: raws(`{"id":"e1","ok":true}`, `{"id":"bad","ok":false}`, `{"id":"e3","ok":true}`),
			events: []string{"e1", "e3"}, unread: []string{"bad"}, last: "e3"},
		{name: "an unreadable entry last is the last id", page: raws(`{"id":"e1","ok":true}`, `{"id":"bad","ok":false}`),
			events: []string{"e1"}, unread: []string{"bad"}, last: "bad"},
		{name: "an entry without an id leaves the last id before it", page: raws(`{"id":"e1","ok":true}`, `{"ok":false}`),
			events: []string{"e1"}, unread: []string{""}, last: "e1"},
		{name: "an id that is not a string is none", page: raws(`{"id":"e1","ok":true}`, `{"id":7}`),
			events: []string{"e1"}, unread: []string{""}, last: "e1"},
		{name: "an entry that is not an object", page: raws(`"evt"`, `[1]`, `{"id":"e3","ok":true}`),
			events: []string{"e3"}, unread: []string{"", ""}, last: "e3"},
		{name: "an empty page", page: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			events, unread, last, err := provider.ReadEvents(c.page, parseTest)
			if err != nil {
				t.Fatal(err)
			}
			var gotEvents, gotUnread []string
			for _, e := range events {
				gotEvents = append(gotEvents, e.ID)
			}
			for _, u := range unread {
				gotUnread = append(gotUnread, u.ID)
				if !errors.Is(u.Err, provider.ErrMalformedEvent) {
					t.Errorf("unreadable %q: err %v, want ErrMalformedEvent", u.ID, u.Err)
				}
			}
			if !slices.Equal(gotEvents, c.events) || !slices.Equal(gotUnread, c.unread) || last != c.last {
				t.Fatalf("events %q unreadable %q last %q, want %q %q %q", gotEvents, gotUnread, last, c.events, c.unread, c.last)
			}
		})
	}
	t.Run("another error ends the page", func(t *testing.T) {
		events, unread, last, err := provider.ReadEvents(raws(`{"id":"e1","ok":true}`, `{"fail":true}`, `{"id":"e3","ok":true}`), parseTest)
		if err == nil || errors.Is(err, provider.ErrMalformedEvent) || events != nil || unread != nil || last != "" {
			t.Fatalf("%v %v %q %v, want only the error", events, unread, last, err)
		}
	})
}

// TestContinueAfter: the next page is asked for after the page's last id;
// when more follow and the page names no id past the one it was read after,
// it is an error, never the same page again nor the end of the run.
func TestContinueAfter(t *testing.T) {
	for _, c := range []struct {
		hasMore      bool
		n            int
		last, cursor string
		want         string
		err          bool
	}{
		{hasMore: false, n: 3, last: "e3", want: ""},
		{hasMore: true, n: 0, want: ""},
		{hasMore: true, n: 3, last: "e3", want: "e3"},
		{hasMore: true, n: 3, last: "e3", cursor: "e0", want: "e3"},
		{hasMore: true, n: 3, last: "", err: true},
		{hasMore: true, n: 1, last: "e0", cursor: "e0", err: true},
	} {
		t.Run(fmt.Sprintf("more=%v,n=%d,last=%q,cursor=%q", c.hasMore, c.n, c.last, c.cursor), func(t *testing.T) {
			got, err := provider.ContinueAfter(c.hasMore, c.n, c.last, c.cursor)
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("%q %v, want %q (error %v)", got, err, c.want, c.err)
			}
		})
	}
}
