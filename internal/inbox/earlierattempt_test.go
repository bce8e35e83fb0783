package inbox

import (
	"context"
	"testing"

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
