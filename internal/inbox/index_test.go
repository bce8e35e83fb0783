package inbox

import (
	"context"
	"errors"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Payment is known by every id the provider may put in an event: the one
// paywarden recorded, a tracked payment's id in spec (before its first status
// write), and the id of the checkout it belongs to (a Stripe Checkout
// Session's events name that); each once.
func TestPaymentProviderIDs(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		status, spec, checkout string
		want                   []string
	}{
		{name: "not created yet: none"},
		{name: "the id paywarden recorded", status: "pay_1", want: []string{"pay_1"}},
		{name: "a tracked payment before its first status write: the id in spec", spec: "pay_1", want: []string{"pay_1"}},
		{name: "a tracked payment's ids, normally equal, are listed once", status: "pay_1", spec: "pay_1", want: []string{"pay_1"}},
		{name: "ids in status and spec that differ are both listed", status: "pay_1", spec: "pay_2", want: []string{"pay_1", "pay_2"}},
		{name: "the checkout's id alone", checkout: "co_1", want: []string{"co_1"}},
		{name: "the payment's and its checkout's ids: both", status: "pay_1", checkout: "co_1", want: []string{"pay_1", "co_1"}},
		{name: "a checkout id equal to the payment id is listed once", status: "pay_1", checkout: "pay_1", want: []string{"pay_1"}},
		{name: "a checkout id equal to the tracked id is listed once", spec: "pay_1", checkout: "pay_1", want: []string{"pay_1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paidOrder()
			p.Status.ProviderPaymentID, p.Spec.ProviderPaymentID, p.Status.CheckoutID = tc.status, tc.spec, tc.checkout
			if got := PaymentProviderIDs(p); !slices.Equal(got, tc.want) {
				t.Errorf("ids %q, want %q", got, tc.want)
			}
		})
	}
}

// SetupIndexes fails, naming the index, when the cache refuses one (the
// manager must not start with an inbox that cannot find payments).
func TestSetupIndexesReportsARefusedIndex(t *testing.T) {
	for _, field := range []string{IndexPaymentMerchantRef, IndexPaymentProviderID, IndexRefundPayment, IndexRefundProviderID} {
		t.Run(field, func(t *testing.T) {
			refused := errors.New("indexer conflict")
			err := SetupIndexes(context.Background(), refusingIndexer{field: field, err: refused})
			if !errors.Is(err, refused) {
				t.Fatalf("err %v, want the refusal of %s", err, field)
			}
		})
	}
}

// refusingIndexer refuses one field and accepts the others.
type refusingIndexer struct {
	field string
	err   error
}

func (r refusingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	if field == r.field {
		return r.err
	}
	return nil
}
