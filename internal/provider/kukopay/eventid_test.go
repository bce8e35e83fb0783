package kukopay_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// TestEventPaymentIDIsThePaymentID: for every event type paywarden acts on, PaymentID is
// the payment id Create returned (data.object.id of a payment, data.object.payment of a
// refund or dispute), never the refund's or dispute's own id, which the core would take
// for a second payment of the same order.
func TestEventPaymentIDIsThePaymentID(t *testing.T) {
	const pay = "pay_3MtwBwLkdIwHu7ix"
	paymentObj := func(status string) string {
		return `{"id":"` + pay + `","object":"payment","out_trade_no":"ORD-1","amount":1000,"amount_received":1000,"currency":"CNY","status":"` + status + `"}`
	}
	tests := []struct {
		typ, object string
	}{
		{"payment.succeeded", paymentObj("succeeded")},
		{"payment.failed", paymentObj("failed")},
		{"payment.expired", paymentObj("expired")},
		{"payment.authorized", paymentObj("requires_capture")},
		{"payment.canceled", paymentObj("canceled")},
		{"refund.failed", `{"id":"re_9aB3kLmN","object":"refund","payment":"` + pay + `","out_trade_no":"ORD-1","amount":300,"currency":"CNY","status":"failed","payment_amount_refunded":0}`},
		{"refund.succeeded", `{"id":"re_9aB3kLmN","object":"refund","payment":"` + pay + `","out_trade_no":"ORD-1","amount":300,"currency":"CNY","status":"succeeded","payment_amount_refunded":300}`},
		{"dispute.created", `{"id":"dp_7QwErTy","object":"dispute","payment":"` + pay + `","out_trade_no":"ORD-1","amount":1000,"currency":"CNY","reason":"fraudulent","status":"needs_response"}`},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.typ] = true
		t.Run(tt.typ, func(t *testing.T) {
			ev, err := kukopay.ParseEvent([]byte(`{"id":"evt_1","object":"event","type":"` + tt.typ + `","created":1758456000,"data":{"object":` + tt.object + `}}`))
			if err != nil || !ev.Supported {
				t.Fatalf("%+v %v", ev, err)
			}
			if ev.PaymentID != pay || ev.MerchantReference != "ORD-1" {
				t.Fatalf("PaymentID %q, MerchantReference %q", ev.PaymentID, ev.MerchantReference)
			}
		})
	}
	for typ := range kukopay.EventStatuses() {
		if !covered[typ] {
			t.Errorf("supported event type %s has no payment id case", typ)
		}
	}
	t.Run("refund without its payment has none, not the refund id", func(t *testing.T) {
		ev, err := kukopay.ParseEvent([]byte(`{"id":"evt_2","type":"refund.succeeded","created":1758456000,"data":{"object":{"id":"re_1","object":"refund","out_trade_no":"ORD-1","amount":1,"currency":"CNY"}}}`))
		if err != nil || ev.PaymentID != "" {
			t.Fatalf("PaymentID %q %v", ev.PaymentID, err)
		}
	})
}
