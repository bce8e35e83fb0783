package inbox

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// An order may be paid again after its first attempt expired (SPEC §12.1:
// Expired releases the merchant reference). The first attempt's Stripe
// Checkout session cs_old expired and its Payment was deleted; the retry's
// session cs_new is open and awaits its PaymentIntent. The first session's
// checkout.session.expired, redelivered or backfilled, finds the retry by
// merchant reference. It names another checkout: it must not settle the
// open session Expired nor replace its recorded id with cs_old (it did:
// no ids were compared while a payment awaited its payment id). It is
// taken as news of another payment of the order, for a human.
func TestAnEarlierCheckoutsEventDoesNotSettleTheOpenRetry(t *testing.T) {
	retry := paidOrder()
	retry.Name, retry.UID = "order-retry", "retry-uid"
	retry.Spec.MerchantReference = "order-1"
	retry.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CreateRequestedAt: &metav1.Time{Time: t0},
		ProviderPaymentID: "cs_new", CheckoutID: "cs_new"}
	in, c := newFakeInbox(t, retry)

	ev := provider.Event{ID: "evt-old-expired", Type: "checkout.session.expired", Status: provider.StatusExpired, Supported: true, OccurredAt: t0,
		PaymentID: "cs_old", CheckoutID: "cs_old", MerchantReference: "order-1", Raw: []byte(`{"id":"evt-old-expired"}`)}
	out, _ := deliver(t, in, c, ev)

	p := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(retry), p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1alpha1.PhasePending || p.Status.ProviderPaymentID != "cs_new" {
		t.Errorf("the first checkout's event (cs_old) moved the open retry (cs_new): phase %s, providerPaymentID %q, checkoutID %q; event result %s (%s)",
			p.Status.Phase, p.Status.ProviderPaymentID, p.Status.CheckoutID, out.Result, out.Message)
	}
}

// An order's first attempt (Payment "order", provider payment pay_old)
// failed, which releases the merchant reference, and its Payment was
// deleted. The retry "order-retry" has stored its create marker; its create
// is out and not answered, so it has no provider id. The first attempt's
// event, redelivered or backfilled, finds the retry by merchant reference.
// Nothing tells the two apart yet: taken as the retry's, pay_old became the
// retry's id and its outcome the retry's phase, while the retry's own
// create may still charge. The event waits (Orphaned) until the create's
// answer gives the retry its id; applied then, it is news of another
// payment of the order (DuplicatePayment review), and the retry keeps its
// own id and phase. An event of the retry's own payment applies as usual.
func TestAnEventWaitsWhileItsPaymentsCreateIsUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name, eventPayment string
		wantPhase          v1alpha1.PaymentPhase
		wantReview         bool
	}{
		{"an earlier attempt's failure", "pay_old", v1alpha1.PhasePending, true},
		{"the retry's own success", "pay_new", v1alpha1.PhaseSucceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retry := paidOrder()
			retry.Name, retry.UID = "order-retry", "retry-uid"
			retry.Spec.MerchantReference = "order-1"
			retry.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CreateRequestedAt: &metav1.Time{Time: t0}}
			in, c := newFakeInbox(t, retry)

			status := provider.StatusFailed
			if !tc.wantReview {
				status = provider.StatusSucceeded
			}
			ev := provider.Event{ID: "evt-" + tc.eventPayment, Type: "payment." + string(status), Status: status, Supported: true, OccurredAt: t0,
				PaymentID: tc.eventPayment, MerchantReference: "order-1", Amount: 1999, Currency: "USD", Raw: []byte(`{"id":"evt"}`)}
			out, evt := deliver(t, in, c, ev)
			p := &v1alpha1.Payment{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(retry), p); err != nil {
				t.Fatal(err)
			}
			if out.Result != v1alpha1.ResultOrphaned || p.Status.Phase != v1alpha1.PhasePending || p.Status.ProviderPaymentID != "" {
				t.Fatalf("while the retry's create is unanswered the event was %s (%s) and the retry is %s with id %q; want the event Orphaned and the retry untouched",
					out.Result, out.Message, p.Status.Phase, p.Status.ProviderPaymentID)
			}

			// The create is answered: the retry has its own id.
			p.Status.ProviderPaymentID = "pay_new"
			if err := c.Status().Update(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			out, _ = apply(t, in, evt, ev)
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(retry), p); err != nil {
				t.Fatal(err)
			}
			review := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
			gotReview := review != nil && review.Status == metav1.ConditionTrue && review.Reason == v1alpha1.ReasonDuplicatePayment
			if p.Status.Phase != tc.wantPhase || p.Status.ProviderPaymentID != "pay_new" || gotReview != tc.wantReview {
				t.Errorf("after the create's answer the event was %s (%s); the retry is %s with id %q and DuplicatePayment review %v; want %s, pay_new, review %v",
					out.Result, out.Message, p.Status.Phase, p.Status.ProviderPaymentID, gotReview, tc.wantPhase, tc.wantReview)
			}
		})
	}
}
