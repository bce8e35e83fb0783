package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
)

// TestBackfillGoesOnPastAnEventItCannotRead: every events page the provider
// answers starts with an entry that is not an event (an id and nothing else).
// The run must store every real event behind it, count the entry as
// unstorable, say so in a Warning Event, and complete: before, the entry
// failed the page, and the run, at the same place on every interval until it
// fell out of the window, and nothing behind it was read.
func TestBackfillGoesOnPastAnEventItCannotRead(t *testing.T) {
	t.Parallel()
	const total = 3
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderStripe, v1alpha1.ProviderPayPal, v1alpha1.ProviderKukoPay, v1alpha1.ProviderGeneric} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			s, m, prov := backfillOf(t, typ, total, func(s *fixture.Sim) *fixture.Sim { return withUnreadableEvent(t, s, `{"id":"evt-unreadable"}`) })
			ns := prov.Namespace

			if _, err := m.Backfill.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionBackfill)
			if c == nil || c.Reason != v1alpha1.ReasonBackfillSynced || !strings.Contains(c.Message, "1 unstorable") {
				t.Fatalf("Backfill condition: %s; want Synced, naming the 1 unstorable entry", fixture.Dump(c))
			}
			stored := map[string]bool{}
			for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
				stored[e.Spec.EventID] = true
			}
			for _, ev := range s.Events(string(typ)) {
				if !stored[ev.ID] {
					t.Errorf("event %s behind the unreadable entry was not stored", ev.ID)
				}
			}
			skipped := m.Events.About(prov.Name, "BackfillEventSkipped")
			if len(skipped) != 1 || skipped[0].Type != "Warning" || !strings.Contains(skipped[0].Message, `"evt-unreadable"`) {
				t.Errorf("BackfillEventSkipped Events %+v; want one Warning naming the entry", skipped)
			}
		})
	}
}

// withUnreadableEvent is s behind a front that puts entry first in every
// events page it answers (the "data" list of KukoPay and Stripe, the
// "events" list of the generic API and PayPal).
func withUnreadableEvent(t *testing.T, s *fixture.Sim, entry string) *fixture.Sim {
	t.Helper()
	h := s.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "events") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var page map[string]json.RawMessage
		if rec.Code == http.StatusOK && json.Unmarshal(body, &page) == nil {
			for _, key := range []string{"data", "events"} {
				var list []json.RawMessage
				if raw, ok := page[key]; ok && json.Unmarshal(raw, &list) == nil {
					page[key], _ = json.Marshal(append([]json.RawMessage{json.RawMessage(entry)}, list...))
				}
			}
			body, _ = json.Marshal(page)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = bytes.NewReader(body).WriteTo(w)
	}))
	t.Cleanup(srv.Close)
	return &fixture.Sim{Sim: s.Sim, URL: srv.URL}
}
