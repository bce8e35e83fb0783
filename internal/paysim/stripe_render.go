package paysim

import (
	"encoding/json"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"
)

// Stripe objects are built as stripe-go structs and marshalled, then expandable
// references that were not asked for are collapsed to their id, as Stripe does
// ("latest_charge": "ch_..." unless expand[]=latest_charge).

// stripeExpandable are the references paysim renders; each is an id unless expanded.
var stripeExpandable = []string{"customer", "payment_method", "latest_charge", "payment_intent", "charge"}

// renderJSON marshals v and collapses unexpanded references. expand holds dotted
// paths relative to v ("latest_charge", "payment_intent.latest_charge").
func renderJSON(v any, expand []string) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	collapse(m, expand)
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

func collapse(m map[string]any, expand []string) {
	for _, k := range stripeExpandable {
		obj, ok := m[k].(map[string]any)
		if !ok {
			continue
		}
		var sub []string
		expanded := false
		for _, e := range expand {
			if e == k {
				expanded = true
			} else if rest, ok := strings.CutPrefix(e, k+"."); ok {
				expanded = true
				sub = append(sub, rest)
			}
		}
		if expanded {
			collapse(obj, sub)
		} else {
			m[k] = obj["id"]
		}
	}
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// stripeIntentObject builds the PaymentIntent as stripe-go's type.
func (s *Sim) stripeIntentObject(pi *stripeIntent) stripego.PaymentIntent {
	o := stripego.PaymentIntent{
		ID: pi.id, Object: "payment_intent", Amount: pi.amount, AmountCapturable: pi.capturable, AmountReceived: pi.received,
		CaptureMethod: pi.captureMethod, Currency: stripego.Currency(pi.currency), Status: pi.status,
		CancellationReason: pi.cancellationReason, CanceledAt: unixOrZero(pi.canceledAt), Created: pi.created.Unix(),
		ClientSecret: pi.id + "_secret_paysim", ConfirmationMethod: stripego.PaymentIntentConfirmationMethodAutomatic,
		Description: pi.descr, LastPaymentError: pi.lastError, Metadata: cloneMeta(pi.metadata),
		PaymentMethodTypes: []string{"card"},
	}
	if pi.customer != "" {
		o.Customer = &stripego.Customer{ID: pi.customer, Object: "customer"}
	}
	if pi.paymentMethod != "" {
		o.PaymentMethod = &stripego.PaymentMethod{ID: pi.paymentMethod, Object: "payment_method", Type: stripego.PaymentMethodTypeCard}
	}
	if pi.nextActionURL != "" {
		o.NextAction = &stripego.PaymentIntentNextAction{
			Type:          stripego.PaymentIntentNextActionTypeRedirectToURL,
			RedirectToURL: &stripego.PaymentIntentNextActionRedirectToURL{URL: pi.nextActionURL},
		}
	}
	if pi.charge != nil {
		ch := s.stripeChargeObject(pi)
		o.LatestCharge = &ch
	}
	return o
}

// stripeChargeObject builds the intent's latest charge.
func (s *Sim) stripeChargeObject(pi *stripeIntent) stripego.Charge {
	c := pi.charge
	ch := stripego.Charge{
		ID: c.id, Object: "charge", Amount: c.amount, AmountCaptured: c.captured, AmountRefunded: c.refunded,
		Captured: c.captured > 0, Refunded: c.captured > 0 && c.refunded >= c.captured, Currency: stripego.Currency(pi.currency),
		Created: c.created.Unix(), Disputed: pi.disputed, Paid: c.status == stripego.ChargeStatusSucceeded, Status: c.status,
		PaymentIntent: &stripego.PaymentIntent{ID: pi.id}, Metadata: cloneMeta(pi.metadata),
		FailureCode: c.failureCode, FailureMessage: c.failureMsg, PaymentMethod: pi.paymentMethod,
		PaymentMethodDetails: &stripego.ChargePaymentMethodDetails{
			Type: "card",
			Card: &stripego.ChargePaymentMethodDetailsCard{
				Brand: stripego.PaymentMethodCardBrandVisa, Last4: "4242", AmountAuthorized: c.amount, CaptureBefore: unixOrZero(c.captureBefore),
			},
		},
	}
	if pi.customer != "" {
		ch.Customer = &stripego.Customer{ID: pi.customer, Object: "customer"}
	}
	return ch
}

func (s *Sim) stripeIntentJSON(pi *stripeIntent, expand []string) json.RawMessage {
	return renderJSON(s.stripeIntentObject(pi), expand)
}

func (s *Sim) stripeChargeJSON(pi *stripeIntent) json.RawMessage {
	return renderJSON(s.stripeChargeObject(pi), nil)
}

// stripeSessionJSON renders a Checkout Session; its PaymentIntent is rendered in full
// when expanded.
func (s *Sim) stripeSessionJSON(cs *stripeSession, expand []string) json.RawMessage {
	o := stripego.CheckoutSession{
		ID: cs.id, Object: "checkout.session", AmountSubtotal: cs.amount, AmountTotal: cs.amount,
		Currency: stripego.Currency(cs.currency), ClientReferenceID: cs.ref, Created: cs.created.Unix(),
		ExpiresAt: cs.expiresAt.Unix(), Metadata: cloneMeta(cs.metadata), Mode: stripego.CheckoutSessionModePayment,
		PaymentStatus: cs.paymentStatus, Status: cs.status, SuccessURL: cs.successURL, CancelURL: cs.cancelURL,
	}
	if cs.status == stripego.CheckoutSessionStatusOpen {
		// Stripe clears the url once the session is complete or expired.
		o.URL = cs.url
	}
	if cs.customer != "" {
		o.Customer = &stripego.Customer{ID: cs.customer, Object: "customer"}
	}
	if pi := s.stripe.intents[cs.intent]; pi != nil {
		obj := s.stripeIntentObject(pi)
		o.PaymentIntent = &obj
	}
	return renderJSON(o, expand)
}

func (s *Sim) stripeRefundJSON(rf *stripeRefund) json.RawMessage {
	return renderJSON(stripego.Refund{
		ID: rf.id, Object: "refund", Amount: rf.amount, Currency: stripego.Currency(rf.currency),
		PaymentIntent: &stripego.PaymentIntent{ID: rf.intent}, Charge: &stripego.Charge{ID: rf.charge},
		Status: rf.status, Reason: rf.reason, FailureReason: rf.failureReason, Metadata: cloneMeta(rf.metadata),
		Created: rf.created.Unix(),
	}, nil)
}

// stripeList is Stripe's list envelope with pre-rendered items.
type stripeList struct {
	Object string `json:"object"` // "list"
	stripego.ListMeta
	Data []json.RawMessage `json:"data"`
}

// stripeSearchResult is Stripe's search envelope with pre-rendered items.
type stripeSearchResult struct {
	Object string `json:"object"` // "search_result"
	stripego.SearchMeta
	Data []json.RawMessage `json:"data"`
}

// stripeErrorBody is Stripe's error envelope.
type stripeErrorBody struct {
	Error *stripego.Error `json:"error"`
}
