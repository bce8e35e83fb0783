package payment_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
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
	t.Run("a key of exactly MaxRefundKey characters stays readable, one more is hashed", func(t *testing.T) {
		rf := incarnation(oldUID, 500)
		fits := paidPayment(0)
		fits.Spec.IdempotencyKey = strings.Repeat("k", payment.MaxRefundKey-len("/refund/")-len(oldUID))
		if k := payment.RefundKey(fits, rf); k != fits.Spec.IdempotencyKey+"/refund/"+oldUID {
			t.Errorf("key %q (%d chars), want the payment's key kept whole", k, len(k))
		}
		over := paidPayment(0)
		over.Spec.IdempotencyKey = fits.Spec.IdempotencyKey + "k"
		if k := payment.RefundKey(over, rf); len(k) > payment.MaxRefundKey || strings.HasPrefix(k, over.Spec.IdempotencyKey) {
			t.Errorf("key %q (%d chars), want the payment's key hashed to fit", k, len(k))
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
			if payment.ForeignRefund(rf, "", s) != "" {
				t.Errorf("a Refund's own reference is foreign to it")
			}
		})
	}
	for _, s := range []string{"", "shop/r1", "shop//" + newUID, "shop/r1/", "a/b/c/d", "/r1/" + newUID} {
		if ref, ok := payment.ParseRefundReference(s); ok {
			t.Errorf("%q read as a Refund's reference: %+v", s, ref)
		}
	}
}

func TestForeignRefund(t *testing.T) {
	fresh := incarnation(newUID, 300)
	sent := incarnation(newUID, 300)
	sent.Status.ProviderRefundID = "re_new"
	for _, tc := range []struct {
		name      string
		rf        *v1alpha1.Refund
		id, ref   string
		isForeign bool
	}{
		{"its own reference", fresh, "re_new", "shop/r1/" + newUID, false},
		{"an earlier Refund of the same name", fresh, "re_old", "shop/r1/" + oldUID, true},
		{"the same uid in another namespace", fresh, "", "other/r1/" + newUID, true},
		{"another refund id than the one recorded", sent, "re_old", "", true},
		{"the recorded refund id", sent, "re_new", "", false},
		{"the recorded id cannot make another Refund's reference its own", sent, "re_new", "shop/r1/" + oldUID, true},
		{"a refund made elsewhere (no reference) is left to the id", fresh, "re_dash", "", false},
		{"a reference without a uid (sent before uids) names no Refund", fresh, "re_old", "shop/r1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if why := payment.ForeignRefund(tc.rf, tc.id, tc.ref); (why != "") != tc.isForeign {
				t.Errorf("ForeignRefund = %q, want foreign=%v", why, tc.isForeign)
			}
		})
	}
}

// TestARefundNeverAdoptsAnotherRefundsObservation: the re-created "r1"
// (asking 300) sees the old "r1"'s refund of 500 succeed (a redelivered
// webhook, the backfill's copy, or a status answer): it is not its refund,
// so it neither settles nor takes its amount.
func TestARefundNeverAdoptsAnotherRefundsObservation(t *testing.T) {
	oldRefund := func(o *payment.Observation) {
		o.ProviderRefundID, o.RefundReference = "re_old", "shop/r1/"+oldUID
	}
	ownRefund := func(o *payment.Observation) {
		o.ProviderRefundID, o.RefundReference = "re_new", "shop/r1/"+newUID
	}
	undecided := incarnation(newUID, 0) // no amount yet: the one it could adopt
	marked := incarnation(newUID, 300)
	marked.Status.Phase = v1alpha1.RefundPending
	marked.Status.Amount = &v1alpha1.Money{Value: 300, Currency: orderCurrency}
	marked.Status.CreateRequestedAt = ptrTime(t0)
	sent := marked.DeepCopy()
	sent.Status.ProviderRefundID = "re_new"
	for _, tc := range []struct {
		name     string
		given    *v1alpha1.Refund
		obs      payment.Observation
		decision payment.Decision
		phase    v1alpha1.RefundPhase
		amount   int64 // 0: none
	}{
		{"the old Refund's success does not settle an undecided new one", undecided, refundObs(payment.ObservedSucceeded, "evt-old", withAmount(500, orderCurrency), oldRefund), payment.Ignored, "", 0},
		{"the old Refund's success does not settle one in flight", marked, refundObs(payment.ObservedSucceeded, "evt-old", withAmount(500, orderCurrency), oldRefund), payment.Ignored, v1alpha1.RefundPending, 300},
		{"the old Refund's failure does not fail it", marked, refundObs(payment.ObservedFailed, "evt-old-f", oldRefund), payment.Ignored, v1alpha1.RefundPending, 300},
		{"a status answer about the old refund id is not its own", sent, refundObs(payment.ObservedSucceeded, "", withAmount(500, orderCurrency), oldRefund), payment.Ignored, v1alpha1.RefundPending, 300},
		{"its own success settles it with its own amount", sent, refundObs(payment.ObservedSucceeded, "evt-new", withAmount(300, orderCurrency), ownRefund), payment.Applied, v1alpha1.RefundSucceeded, 300},
		{"its own success before it was decided records the amount refunded", undecided, refundObs(payment.ObservedSucceeded, "evt-new", withAmount(300, orderCurrency), ownRefund), payment.Applied, v1alpha1.RefundSucceeded, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := payment.ApplyRefund(tc.given, tc.obs, t0)
			var amount int64
			if a := res.Status.Amount; a != nil {
				amount = a.Value
			}
			if res.Decision != tc.decision || res.Status.Phase != tc.phase || amount != tc.amount {
				t.Fatalf("%s -> %q with amount %d (%s), want %s -> %q with %d", res.Decision, res.Status.Phase, amount, res.Reason, tc.decision, tc.phase, tc.amount)
			}
			if tc.decision == payment.Ignored && (res.Status.ProviderRefundID != tc.given.Status.ProviderRefundID || len(res.Status.RecentEventIDs) != len(tc.given.Status.RecentEventIDs)) {
				t.Errorf("a refused observation left a trace: %+v", res.Status)
			}
		})
	}
	t.Run("a refund call answered with another Refund's refund records nothing of it", func(t *testing.T) {
		// spec.idempotencyKey reused by the new Refund: the provider replays
		// the old refund. It is not this one's; what became of this one's
		// call is unknown.
		pol := testPolicy()
		out := payment.AfterRefundCreate(marked, pol, payment.RefundCall{Refund: provider.Refund{
			ID: "re_old", Reference: "shop/r1/" + oldUID, Status: provider.RefundSucceeded, Amount: 500, Currency: orderCurrency,
		}}, t0)
		if out.Status.ProviderRefundID != "" || out.Status.Phase != v1alpha1.RefundUnknown || refundReview(&out.Status) != v1alpha1.ReasonCreateOutcomeUnknown || out.Status.Amount.Value != 300 {
			t.Fatalf("status after the answer: %+v", out.Status)
		}
	})
}

// TestRefundCallNames: a refund call names the capture and the merchant
// reference only when the Payment created the order its Refund's marker
// names; everything else has the adapter read the order, so the call is the
// same whichever way it is made.
func TestRefundCallNames(t *testing.T) {
	marked := func(order string) *v1alpha1.Refund {
		rf := incarnation(oldUID, 500)
		rf.Status.ProviderPaymentID = order
		return rf
	}
	paid := func(edit func(*v1alpha1.Payment)) *v1alpha1.Payment {
		p := paidPayment(0)
		p.Namespace, p.Name = "shop", "order-1"
		p.Spec.MerchantReference = "cart-7"
		p.Status.CaptureID = "cap_1"
		if edit != nil {
			edit(p)
		}
		return p
	}
	for _, tc := range []struct {
		name         string
		p            *v1alpha1.Payment
		rf           *v1alpha1.Refund
		capture, ref string
	}{
		{"the payment created the marker's order: its capture and reference", paid(nil), marked("pay_1"), "cap_1", "cart-7"},
		{"no capture read yet: the reference, the capture read by the adapter", paid(func(p *v1alpha1.Payment) { p.Status.CaptureID = "" }), marked("pay_1"), "", "cart-7"},
		{"the default merchant reference", paid(func(p *v1alpha1.Payment) { p.Spec.MerchantReference = "" }), marked("pay_1"), "cap_1", "shop.order-1"},
		{"a tracked order carries its own reference: read", paid(func(p *v1alpha1.Payment) { p.Spec.ProviderPaymentID = "pay_1" }), marked("pay_1"), "", ""},
		{"the payment follows another order now: the marker's is read", paid(nil), marked("pay_0"), "", ""},
		{"a marker without an order", paid(nil), marked(""), "", ""},
		{"neither knows an order", paid(func(p *v1alpha1.Payment) { p.Status.ProviderPaymentID = "" }), marked(""), "", ""},
		{"no payment", nil, marked("pay_1"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capture, ref := payment.RefundCallNames(tc.p, tc.rf)
			if capture != tc.capture || ref != tc.ref {
				t.Errorf("capture %q, reference %q; want %q, %q", capture, ref, tc.capture, tc.ref)
			}
		})
	}
}
