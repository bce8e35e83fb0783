package inbox

import (
	"context"
	"testing"

	stripego "github.com/stripe/stripe-go/v84"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// TestAnIgnoredBackfillCopyDoesNotSwallowTheReadableWebhookCopy: Stripe
// renders a webhook in its endpoint's api_version, but an event read from
// GET /v1/events in the account's default version at the event's creation
// (docs/providers.md, "Webhook endpoint version"; Stripe API reference,
// "List all events"). An operator who did what the docs say (endpoint pinned
// to paywarden's version) on an account whose default is older gets, for one
// and the same event id, a webhook copy paywarden can read and a backfill
// copy it does not act on. When the receiver was down (the case the backfill
// exists for), the backfill reads the event first; were that copy stored
// (Ignored) under the event's name, the webhook redelivery would be answered
// as a duplicate and never applied, and a dispute, which no status query
// reports, lost for good. A listed event not acted on is not stored.
func TestAnIgnoredBackfillCopyDoesNotSwallowTheReadableWebhookCopy(t *testing.T) {
	ctx := context.Background()
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order", UID: "pay-uid"},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: "stripe"},
			MerchantReference: "ORD-1",
			Amount:            v1alpha1.Amount{Value: 1000, Currency: "EUR"},
		},
		Status: v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pi_3QaZ"},
	}
	in, c := newFakeInbox(t, p)
	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stripe"}, Spec: v1alpha1.PaymentProviderSpec{Type: "stripe"}}

	dispute := func(apiVersion string) []byte {
		return []byte(`{"id":"evt_dispute_1","object":"event","api_version":"` + apiVersion + `","type":"charge.dispute.created","created":1767225600,` +
			`"data":{"object":{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":"pi_3QaZ","reason":"fraudulent","status":"needs_response"}}}`)
	}
	// 1. The backfill reads the event from /v1/events, rendered in the
	//    account's default version.
	backfilled, err := stripe.ParseEvent(dispute("2020-08-27"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := in.Receive(ctx, prov, backfilled, v1alpha1.ViaBackfill, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backfill copy: stored %v, %s: %s", out.Stored, out.Result, out.Message)

	// 2. Stripe's retry of the webhook, rendered in the endpoint's version.
	webhook, err := stripe.ParseEvent(dispute(stripego.APIVersion))
	if err != nil {
		t.Fatal(err)
	}
	if !webhook.Supported {
		t.Fatalf("setup: the webhook copy should be readable: %+v", webhook)
	}
	out, err = in.Receive(ctx, prov, webhook, v1alpha1.ViaWebhook, stripe.SchemeStripeSignature, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("webhook copy: stored %v, %s: %s", out.Stored, out.Result, out.Message)

	got := &v1alpha1.Payment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionDisputed) {
		t.Errorf("the dispute was never applied: the readable webhook copy was dropped as a duplicate of the backfill copy "+
			"recorded Ignored (webhook result %s %q); conditions %+v", out.Result, out.Message, got.Status.Conditions)
	}
}
