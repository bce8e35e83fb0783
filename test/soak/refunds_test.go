package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
)

// RefundStory is what happens to the Refunds of a payment that took money.
type RefundStory string

// The refund stories.
const (
	// RefundsConcurrent: 1-3 Refunds created together, adding up to at
	// most what the payment received (a third of the time all of it, the
	// last Refund without an amount: everything still refundable).
	RefundsConcurrent RefundStory = "1-3 concurrent"
	// RefundsOver: as concurrent, and one more created right after them
	// that would return more than is left: it must be refused (Failed,
	// OverRefund) without any provider call.
	RefundsOver RefundStory = "concurrent and an over-refund attempt"
	// RefundRecreated: a Refund that settled is deleted and created again
	// under its name with another amount: the new object refunds once, its
	// own amount. The old refund's webhooks are held back until the new
	// object exists, and the provider refuses the new object's refund call
	// for a few seconds, so those webhooks arrive while it has no refund of
	// its own: they must settle nothing.
	RefundRecreated RefundStory = "deleted and re-created"
	// RefundReapplied: 1-2 Refunds; the first, once settled, is deleted and
	// applied again from its manifest in the re-apply waves: the new object
	// adopts the outcome from the ledger and refunds nothing.
	RefundReapplied RefundStory = "settled, deleted and re-applied"
	// RefundReversed (Stripe): 1-2 Refunds; once they succeeded and the
	// payment counted them, the first fails at the provider (Stripe's
	// refund.failed): the Refund ends Failed (RefundReversed) and the
	// payment's refunded total drops to the provider's.
	RefundReversed RefundStory = "fails after it succeeded"
	// RefundStuck (the others, early payments): a Refund the provider keeps
	// pending ends Unknown (RetriesExhausted); then a Refund is created that
	// fits only if the stuck one is not counted: it must be refused.
	RefundStuck RefundStory = "stuck at the provider, then an over-refund only it prevents"
)

// refundCycle is the refund stories in proportion, shuffled; RefundReversed
// stands for RefundStuck at providers other than Stripe.
func refundCycle(rng *rand.Rand) []RefundStory {
	var out []RefundStory
	for _, x := range []struct {
		story  RefundStory
		weight int
	}{{RefundsConcurrent, 3}, {RefundsOver, 2}, {RefundReapplied, 2}, {RefundRecreated, 2}, {RefundReversed, 3}} {
		for range x.weight {
			out = append(out, x.story)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// plannedRefund is one Refund (name) of the workload.
type plannedRefund struct {
	Name    string
	Payment *planned
	// Amount is spec.amount; 0 asks for everything still refundable.
	Amount int64
	// Later: created by its story after the first ones (an over-refund
	// after a stuck refund).
	Later bool
	// What must become of it.
	Over, Stuck, Reversed bool
	// Reapply: deleted once settled and applied again from its manifest.
	Reapply bool
	// RecreateAmount: deleted once settled and created again under its
	// name with this amount.
	RecreateAmount int64

	// Written by the refund and re-apply loops, read after they ended.
	Created time.Time
	// UIDs are every object of this name, oldest first.
	UIDs []types.UID
	// First is the first object as read before its delete (re-apply,
	// re-create).
	First              *v1alpha1.Refund
	Deleted, Recreated time.Time
	// Reapplied is when the same manifest was created again.
	Reapplied  time.Time
	ReapplyErr string
	// Reversal: when the soak made the provider fail it (RefundReversed).
	ReversedAt time.Time
	// HeldOld: deliveries about the first object held back and let
	// through once the new one existed (re-create).
	HeldOld int
}

func (r *plannedRefund) manifest() *v1alpha1.Refund {
	rf := &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: r.Name},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: r.Payment.Name}, Reason: "soak"},
	}
	amount := r.Amount
	if !r.Recreated.IsZero() {
		amount = r.RecreateAmount
	}
	if amount > 0 {
		rf.Spec.Amount = &v1alpha1.Amount{Value: amount, Currency: r.Payment.Currency}
	}
	return rf
}

// expected is the phase and reason (failure code, review reason) the Refund
// must end in.
func (r *plannedRefund) expected() (v1alpha1.RefundPhase, string) {
	switch {
	case r.Over:
		return v1alpha1.RefundFailed, v1alpha1.ReasonOverRefund
	case r.Stuck:
		return v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted
	case r.Reversed:
		return v1alpha1.RefundFailed, v1alpha1.ReasonRefundReversed
	}
	return v1alpha1.RefundSucceeded, ""
}

// planRefunds decides a payment's Refunds: names, amounts and fates.
func (s *soak) planRefunds(p *planned, story RefundStory, early bool, rng *rand.Rand) {
	if story == RefundReversed && p.Provider != paysim.Stripe {
		story = RefundStuck
		if !early {
			story = RefundsConcurrent
		}
	}
	p.RefundPlan = story
	received := p.received()
	add := func(amount int64) *plannedRefund {
		r := &plannedRefund{Name: fmt.Sprintf("%s-r%d", p.Name, len(p.Refunds)+1), Payment: p, Amount: amount}
		p.Refunds = append(p.Refunds, r)
		return r
	}
	// split adds k Refunds sharing total (the last without an amount when
	// total is everything).
	split := func(k int, total int64) {
		left := total
		for i := range k {
			if i == k-1 {
				if total == received {
					add(0)
				} else {
					add(left)
				}
				return
			}
			part := max(1, left/int64(k-i)/2+rng.Int64N(max(1, left/int64(k-i))))
			part = min(part, left-int64(k-i-1))
			add(part)
			left -= part
		}
	}
	share := func(lo, hi int) int64 { return max(int64(len(p.Refunds)+1), received*int64(lo+rng.IntN(hi-lo+1))/100) }
	switch story {
	case RefundsConcurrent, RefundsOver:
		total := received
		if rng.IntN(3) > 0 {
			total = share(30, 90)
		}
		k := 1 + rng.IntN(3)
		split(k, total)
		if story == RefundsOver {
			over := add(received - total + 1 + rng.Int64N(max(1, total)))
			over.Over = true
			over.Name = p.Name + "-rx" // after the others in name order, as in time
		}
	case RefundReapplied:
		split(1+rng.IntN(2), share(30, 80))
		p.Refunds[0].Reapply = true
	case RefundRecreated:
		r := add(share(20, 40))
		r.RecreateAmount = max(1, r.Amount/2)
	case RefundReversed:
		split(1+rng.IntN(2), share(30, 80))
		p.Refunds[0].Reversed = true
	case RefundStuck:
		p.StuckRefunds = true
		stuck := add(share(50, 80))
		stuck.Stuck = true
		left := received - stuck.Amount
		over := add(left + 1 + rng.Int64N(stuck.Amount))
		over.Over, over.Later = true, true
		over.Name = p.Name + "-rx"
	}
}

// refunds drives the refund stories: it creates a payment's Refunds once
// paywarden has seen the payment take the money, and plays each story's
// later steps (the over-refund after a stuck refund, the failure at the
// provider after a success, the delete and re-create).
func (s *soak) refunds(ctx context.Context) {
	c := s.st.CP.Client
	for ctx.Err() == nil {
		for _, p := range s.snapshot() {
			if len(p.Refunds) == 0 {
				continue
			}
			pay := &v1alpha1.Payment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.Name}, pay); err != nil {
				continue
			}
			if !pay.Status.Phase.TookMoney() {
				continue
			}
			for _, r := range p.Refunds {
				s.refundStep(ctx, p, pay, r)
			}
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// refundStep takes one Refund one step further in its story.
func (s *soak) refundStep(ctx context.Context, p *planned, pay *v1alpha1.Payment, r *plannedRefund) {
	c := s.st.CP.Client
	key := client.ObjectKey{Namespace: namespace, Name: r.Name}
	switch {
	case r.Created.IsZero():
		if r.Later && !s.stuckSiblingsParked(ctx, p) {
			return
		}
		var hold func()
		if r.RecreateAmount > 0 {
			hold = s.holdOldRefundEvents(r)
		}
		rf := r.manifest()
		if err := c.Create(ctx, rf); err != nil && !apierrors.IsAlreadyExists(err) {
			if hold != nil {
				hold()
			}
			return
		}
		got := s.getRefund(ctx, key)
		s.set(func() {
			r.Created = time.Now()
			if got != nil {
				r.UIDs = append(r.UIDs, got.UID)
			}
		})
	case r.RecreateAmount > 0 && r.Recreated.IsZero():
		s.recreateStep(ctx, p, pay, r)
	case r.Reversed && r.ReversedAt.IsZero():
		s.reverseStep(ctx, p, pay, r)
	}
}

// stuckSiblingsParked: every stuck Refund of the payment is Unknown (its
// schedule exhausted), so a Refund created now must count it.
func (s *soak) stuckSiblingsParked(ctx context.Context, p *planned) bool {
	for _, o := range p.Refunds {
		if !o.Stuck {
			continue
		}
		rf := s.getRefund(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name})
		if rf == nil || rf.Status.Phase != v1alpha1.RefundUnknown {
			return false
		}
	}
	return true
}

func (s *soak) getRefund(ctx context.Context, key client.ObjectKey) *v1alpha1.Refund {
	rf := &v1alpha1.Refund{}
	if err := s.st.CP.Client.Get(ctx, key, rf); err != nil {
		return nil
	}
	return rf
}

// holdOldRefundEvents holds back the webhooks about r's first object (its
// reference names it: "<namespace>/<name>/"), at most 8 s (paysim gives up
// on a delivery after 10 s); it returns the release, which lets them through.
func (s *soak) holdOldRefundEvents(r *plannedRefund) (release func()) {
	ref := namespace + "/" + r.Name + "/"
	h := s.hookRec.Hold(func(_ *http.Request, body []byte) bool { return strings.Contains(string(body), ref) }, 8*time.Second)
	s.mu.Lock()
	s.gated.holds = append(s.gated.holds, heldFor{r, h})
	s.mu.Unlock()
	return func() { h.Release(true) }
}

// recreateStep: once the first object settled, delete it; once it is gone,
// create it again with the other amount while the provider refuses its
// refund call for 3 s, and let the held webhooks about the first object
// through.
func (s *soak) recreateStep(ctx context.Context, p *planned, pay *v1alpha1.Payment, r *plannedRefund) {
	c := s.st.CP.Client
	key := client.ObjectKey{Namespace: namespace, Name: r.Name}
	rf := &v1alpha1.Refund{}
	err := c.Get(ctx, key, rf)
	switch {
	case r.Deleted.IsZero():
		if err != nil || rf.Status.Phase != v1alpha1.RefundSucceeded {
			return
		}
		first := rf.DeepCopy()
		uid := rf.UID
		if err := c.Delete(ctx, rf, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return
		}
		s.set(func() { r.First, r.Deleted = first, time.Now() })
		s.logf("re-create: deleted Refund %s (%s, provider refund %s)", r.Name, p.Provider, r.First.Status.ProviderRefundID)
	case apierrors.IsNotFound(err):
		view, ok := s.simPayment(ctx, p.Provider, pay.Status.ProviderPaymentID)
		if !ok {
			return
		}
		ids := []string{view.ID}
		if view.CaptureID != "" {
			ids = append(ids, view.CaptureID)
		}
		stop := s.provRec.Refuse(refundCallFor(ids), http.StatusServiceUnavailable)
		s.set(func() { r.Recreated = time.Now() })
		if !s.createRetrying(ctx, r.manifest()) {
			stop()
			return
		}
		got := s.getRefund(ctx, key)
		s.mu.Lock()
		if got != nil {
			r.UIDs = append(r.UIDs, got.UID)
		}
		for _, h := range s.gated.holds {
			if h.r == r {
				r.HeldOld = h.h.Caught()
				h.h.Release(true)
			}
		}
		s.mu.Unlock()
		s.logf("re-create: Refund %s created again (%d minor units, was %d), %d held webhooks about the first let through", r.Name, r.RecreateAmount, r.Amount, r.HeldOld)
		time.AfterFunc(3*time.Second, stop)
	}
}

// refundCallFor picks the refund calls (every provider's refund create) of
// the provider payment (or capture) ids.
func refundCallFor(ids []string) func(*http.Request, []byte) bool {
	return func(req *http.Request, body []byte) bool {
		if req.Method != http.MethodPost || !(strings.HasSuffix(req.URL.Path, "/refunds") || strings.HasSuffix(req.URL.Path, "/refund")) {
			return false
		}
		for _, id := range ids {
			if strings.Contains(req.URL.Path, "/"+id+"/") || strings.Contains(string(body), id) {
				return true
			}
		}
		return false
	}
}

// reverseStep: once every Refund of the payment succeeded and the payment
// has read the provider's refunded total since (status.refundsCounted lists
// them all), the provider fails the first one — as a real reversal comes,
// days after the refund.
func (s *soak) reverseStep(ctx context.Context, p *planned, pay *v1alpha1.Payment, r *plannedRefund) {
	var sum int64
	var target string
	for _, o := range p.Refunds {
		rf := s.getRefund(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name})
		if rf == nil || rf.Status.Phase != v1alpha1.RefundSucceeded || rf.Status.Amount == nil || !slices.Contains(pay.Status.RefundsCounted, rf.UID) {
			return
		}
		sum += rf.Status.Amount.Value
		if o == r {
			target = rf.Status.ProviderRefundID
		}
	}
	if a := pay.Status.AmountRefunded; a == nil || a.Value != sum || target == "" {
		return
	}
	if err := s.st.Sim.StripeFailRefund(ctx, target, ""); err != nil {
		return
	}
	s.set(func() { r.ReversedAt = time.Now() })
	s.logf("reversal: Stripe refund %s of Refund %s failed after it succeeded", target, r.Name)
}

// refundStoriesOpen names the refund story steps not played yet.
func (s *soak) refundStoriesOpen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var open []string
	for _, p := range s.payments {
		for _, r := range p.Refunds {
			switch {
			case r.Created.IsZero():
				open = append(open, r.Name+" not created")
			case r.RecreateAmount > 0 && r.Recreated.IsZero():
				open = append(open, r.Name+" not re-created")
			case r.Reversed && r.ReversedAt.IsZero():
				open = append(open, r.Name+" not failed at the provider")
			case r.Reapply && r.Reapplied.IsZero() && r.ReapplyErr == "":
				open = append(open, r.Name+" not re-applied")
			}
		}
	}
	return open
}

// set runs f under the soak's lock: the loops write what the others read.
func (s *soak) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// simPayment is paysim's view of a provider payment.
func (s *soak) simPayment(ctx context.Context, prov, id string) (paysim.PaymentView, bool) {
	if id == "" {
		return paysim.PaymentView{}, false
	}
	views, err := s.st.Sim.Payments(ctx, prov)
	if err != nil {
		return paysim.PaymentView{}, false
	}
	for _, v := range views {
		if v.ID == id {
			return v, true
		}
	}
	return paysim.PaymentView{}, false
}
