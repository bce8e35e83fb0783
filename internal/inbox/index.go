package inbox

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Field indexes on Payments. Both keys carry the provider's name, so a lookup
// in a namespace (cache indexes are per namespace) only ever finds Payments
// that reference that provider: an event of provider A can never match a
// Payment of provider B, even when their ids collide.
const (
	// IndexPaymentMerchantRef indexes Payments by "<provider>/<merchant reference>",
	// the merchant reference with its default (Payment.MerchantRef).
	IndexPaymentMerchantRef = "inbox.merchantRef"
	// IndexPaymentProviderID indexes Payments by "<provider>/<provider payment id>",
	// from status (created by paywarden) and spec (tracked payments).
	IndexPaymentProviderID = "inbox.providerPaymentID"
	// IndexRefundPayment indexes Refunds by the Payment they refund. It is
	// named after the field, which the Refund CRD declares selectable, so the
	// same selector works on the cache and on the API server (a fresh read
	// before a payment is deleted; `kubectl get refunds --field-selector`).
	IndexRefundPayment = "spec.paymentRef.name"
	// IndexRefundProviderID indexes Refunds by "<payment>/<provider refund
	// id>", so a refund event finds its Refund.
	IndexRefundProviderID = "refund.providerRefundID"
)

// Key builds an index key from a provider name and a reference. Provider names
// are DNS subdomains, so the first "/" separates them unambiguously.
func Key(providerName, ref string) string {
	return providerName + "/" + ref
}

// SetupIndexes registers the Payment indexes the inbox resolves events
// through. Call it once per cache (the manager's and the receiver's), before
// the cache starts.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for name, keys := range PaymentIndexes() {
		if err := indexer.IndexField(ctx, &v1alpha1.Payment{}, name, keys); err != nil {
			return fmt.Errorf("index payments by %s: %w", name, err)
		}
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Refund{}, IndexRefundPayment, func(o client.Object) []string {
		return []string{o.(*v1alpha1.Refund).Spec.PaymentRef.Name}
	}); err != nil {
		return fmt.Errorf("index refunds by payment: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Refund{}, IndexRefundProviderID, func(o client.Object) []string {
		r := o.(*v1alpha1.Refund)
		if r.Status.ProviderRefundID == "" {
			return nil
		}
		return []string{r.Spec.PaymentRef.Name + "/" + r.Status.ProviderRefundID}
	}); err != nil {
		return fmt.Errorf("index refunds by provider refund id: %w", err)
	}
	return nil
}

// PaymentIndexes are the inbox's Payment indexes, by name: the thin cache of
// Payments (internal/paymentcache) keeps them too.
func PaymentIndexes() map[string]client.IndexerFunc {
	return map[string]client.IndexerFunc{IndexPaymentMerchantRef: merchantRefKeys, IndexPaymentProviderID: providerIDKeys}
}

func merchantRefKeys(o client.Object) []string {
	p, ok := o.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" {
		return nil
	}
	return []string{Key(p.Spec.ProviderRef.Name, p.MerchantRef())}
}

func providerIDKeys(o client.Object) []string {
	p, ok := o.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" {
		return nil
	}
	ids := PaymentProviderIDs(p)
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, Key(p.Spec.ProviderRef.Name, id))
	}
	return keys
}

// PaymentProviderIDs are the provider's ids a Payment is known by: the one
// paywarden recorded in status and, for a tracked payment, the one in spec.
// They are normally equal; both are listed so an event finds a tracked payment
// before its first status write.
func PaymentProviderIDs(p *v1alpha1.Payment) []string {
	var ids []string
	if id := p.Status.ProviderPaymentID; id != "" {
		ids = append(ids, id)
	}
	if id := p.Spec.ProviderPaymentID; id != "" && id != p.Status.ProviderPaymentID {
		ids = append(ids, id)
	}
	if id := p.Status.CheckoutID; id != "" && id != p.Status.ProviderPaymentID && id != p.Spec.ProviderPaymentID {
		ids = append(ids, id)
	}
	return ids
}
