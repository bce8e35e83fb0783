package inboxtest

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// WaitResult waits until the WebhookEvent of (provider, event id) records a
// result other than Pending, and returns it. The receiver acknowledges an
// event once it is stored and applied; the result on the record follows.
func WaitResult(t testing.TB, c client.Reader, ns, providerName, eventID string) *v1alpha1.WebhookEvent {
	t.Helper()
	var e *v1alpha1.WebhookEvent
	Eventually(t, 10*time.Second, func() (bool, string) {
		e = EventFor(t, c, ns, providerName, eventID)
		if e == nil {
			return false, "event " + eventID + " not stored"
		}
		return e.Status.Result != "" && e.Status.Result != v1alpha1.ResultPending, "event " + eventID + " has no result yet"
	})
	return e
}
