package payment_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A refund's identity at the provider (SPEC §12.1): the payment's plus the
// Refund's UID. "r1" deleted and re-created is another refund.

const (
	oldUID = "0a1b2c3d-0000-4000-8000-000000000001"
	newUID = "0a1b2c3d-0000-4000-8000-000000000002"
)

// incarnation is Refund "r1" of payment "order-1" with uid and spec amount.
func incarnation(uid string, amount int64) *v1alpha1.Refund {
	r := newRefund("r1", amount, t0)
	r.UID = types.UID(uid)
	return r
}

func TestRefundKey(t *testing.T) {
	p := paidPayment(0)
	p.UID = "pay-uid"
	long := paidPayment(0)
	long.Spec.IdempotencyKey = strings.Repeat("k", 255)
	withKey := incarnation(newUID, 300)
	withKey.Spec.IdempotencyKey = "refund-r1-second"
	for _, tc := range []struct {
		name string
		p    *v1alpha1.Payment
		rf   *v1alpha1.Refund
		want string
	}{
		{"the payment's key and the Refund's uid", p, incarnation(oldUID, 500), p.IdempotencyKey() + "/refund/" + oldUID},
		{"a re-created Refund of the same name gets another key", p, incarnation(newUID, 300), p.IdempotencyKey() + "/refund/" + newUID},
		{"spec.idempotencyKey wins", p, withKey, "refund-r1-second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := payment.RefundKey(tc.p, tc.rf); got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("never the uid alone", func(t *testing.T) {
		rf := incarnation(oldUID, 500)
		if k := payment.RefundKey(p, rf); k == oldUID || !strings.HasPrefix(k, p.IdempotencyKey()) {
			t.Errorf("key %q does not derive from the payment's %q", k, p.IdempotencyKey())
		}
		other := paidPayment(0)
		other.UID, other.Spec.IdempotencyKey = "other-pay", "order-2"
		if payment.RefundKey(p, rf) == payment.RefundKey(other, rf) {
			t.Error("the same key for two payments")
		}
	})
	t.Run("a long payment key is hashed to fit every provider", func(t *testing.T) {
		a, b := payment.RefundKey(long, incarnation(oldUID, 500)), payment.RefundKey(long, incarnation(newUID, 500))
		if len(a) > payment.MaxRefundKey || a == b || !strings.HasSuffix(a, "/refund/"+oldUID) || a != payment.RefundKey(long, incarnation(oldUID, 500)) {
			t.Errorf("keys %q (%d chars) and %q", a, len(a), b)
		}
		longer := paidPayment(0)
		longer.Spec.IdempotencyKey = strings.Repeat("k", 254) + "j"
		if payment.RefundKey(longer, incarnation(oldUID, 500)) == a {
			t.Error("two long payment keys hash alike")
		}
	})
}

func TestRefundReference(t *testing.T) {
	for _, tc := range []struct {
		name, ns, rname string
	}{
		{"a short name is kept whole", "shop", "r1"},
		{"a long name is cut to fit PayPal's invoice_id", strings.Repeat("n", 63), strings.Repeat("a", 253)},
		{"a name just too long loses one character and the mark", "shop", strings.Repeat("b", v1alpha1.MaxRefundReference-len("shop//")-len(newUID)+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: tc.rname, UID: newUID}}
			s := rf.Reference()
			ref, ok := payment.ParseRefundReference(s)
			if len(s) > v1alpha1.MaxRefundReference || !ok || ref.Namespace != tc.ns || ref.UID != newUID || !strings.HasPrefix(tc.rname, ref.Name) || ref.Cut != (ref.Name != tc.rname) {
				t.Fatalf("reference %q (%d chars) reads back as %+v, %v", s, len(s), ref, ok)
			}
		})
	}
	for _, s := range []string{"", "shop/r1", "shop//" + newUID, "a/b/c/d", "/r1/" + newUID} {
		if ref, ok := payment.ParseRefundReference(s); ok {
			t.Errorf("%q read as a Refund's reference: %+v", s, ref)
		}
	}
}
