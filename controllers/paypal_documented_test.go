package controllers_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// PayPal behaviour as PayPal documents it and paysim models it
// (docs/providers.md, "Documented behaviour"), end to end through the
// manager.

// shiftedClock is the wall clock moved by a shift the test sets: a manager
// and paysim that share one are hours later together, while requeues and
// timeouts still run in real time.
type shiftedClock struct{ shift atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) Add(d time.Duration)             { c.shift.Add(int64(d)) }

// TestPayPalOrderNobodyCompletedEndsExpired: PayPal deletes an order that
// nobody completed after about 3 hours (paypal.OrderLifetime) and answers
// 404 for it. A payment whose payer never approved is then Expired
// (OrderExpired) on its next read, and one an operator cancels after that is
// Expired too, without a CancelRefused: neither needs review.
func TestPayPalOrderNobodyCompletedEndsExpired(t *testing.T) {
	clk := &shiftedClock{}
	s := fixture.StartSim(t, paysim.Options{Now: clk.Now})
	payersWait(t, s, paysim.PayPal, 0)
	ns := fixture.Namespace(t, env.Client, "expiry")
	prov := fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Schedule: []string{"200ms", "1h"}})
	opts := fixture.Run(controllers.ControllerPayment)
	opts.Clock = clk
	m := fixture.StartManager(t, env, ns, opts)
	abandoned := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "abandoned", Provider: prov.Name}})
	canceled := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "canceled", Provider: prov.Name}})
	for _, p := range []*v1alpha1.Payment{abandoned, canceled} {
		fixture.WaitPayment(t, env.Client, p, "to wait for its payer on the 1h step", func(p *v1alpha1.Payment) bool {
			return p.Status.CustomerAction != nil && p.Status.Query.Attempts == 1
		})
	}
	m.Stop()

	// Three hours and a bit later, for paysim and for a new manager.
	clk.Add(paypal.OrderLifetime + time.Minute)
	fixture.Annotate(t, env.Client, canceled, v1alpha1.AnnotationCancel, "the customer left")
	fixture.Annotate(t, env.Client, abandoned, v1alpha1.AnnotationRequery, "now")
	m = fixture.StartManager(t, env, ns, opts)
	for _, p := range []*v1alpha1.Payment{abandoned, canceled} {
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseExpired, fixture.Timeout)
		if got.Status.Failure == nil || got.Status.Failure.Code != v1alpha1.ReasonOrderExpired || got.Status.ExpiredLocally {
			t.Errorf("%s: failure %+v expiredLocally %v", p.Name, got.Status.Failure, got.Status.ExpiredLocally)
		}
		wantHistoryTo(t, got, v1alpha1.PhaseExpired, map[string]v1alpha1.ObservationSource{"abandoned": v1alpha1.SourceStatusQuery, "canceled": v1alpha1.SourceCancel}[p.Name], v1alpha1.ReasonOrderExpired)
		wantNoReview(t, got)
	}
	for _, reason := range []string{"CancelRefused", "CaptureRefused"} {
		if evs := m.Events.About(canceled.Name, reason); len(evs) > 0 {
			t.Errorf("%s Events for an order that expired: %+v", reason, evs)
		}
	}
	if n := s.Counters().OrdersExpired; n != 2 {
		t.Errorf("paysim expired %d orders, want 2", n)
	}
}
