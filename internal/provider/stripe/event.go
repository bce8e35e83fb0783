package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/paywarden/paywarden/internal/provider"
)

// eventStatuses lists the event types paywarden acts on and what each means for the
// payment. payment_intent.* and checkout.session.* events carry the object whose
// status is normalized as in Get, so the table's value is what that status must be;
// where the object decides (a cancellation is Canceled or Expired), the object wins.
//
// refund.* events carry a refund, whose amount is that refund's alone: they settle a
// Refund resource (Event.Refund) and say nothing decisive about the payment
// (StatusUnknown, which the core acknowledges without a change). The payment's
// cumulative refunded amount comes with charge.refunded.
var eventStatuses = map[stripego.EventType]provider.Status{
	stripego.EventTypePaymentIntentSucceeded:               provider.StatusSucceeded,
	stripego.EventTypePaymentIntentPaymentFailed:           provider.StatusPending,
	stripego.EventTypePaymentIntentProcessing:              provider.StatusProcessing,
	stripego.EventTypePaymentIntentCanceled:                provider.StatusCanceled,
	stripego.EventTypePaymentIntentAmountCapturableUpdated: provider.StatusAuthorized,
	stripego.EventTypePaymentIntentRequiresAction:          provider.StatusPending,
	stripego.EventTypeCheckoutSessionCompleted:             provider.StatusSucceeded,
	stripego.EventTypeCheckoutSessionExpired:               provider.StatusExpired,
	stripego.EventTypeCheckoutSessionAsyncPaymentSucceeded: provider.StatusSucceeded,
	stripego.EventTypeCheckoutSessionAsyncPaymentFailed:    provider.StatusFailed,
	stripego.EventTypeChargeRefunded:                       provider.StatusRefund,
	stripego.EventTypeRefundCreated:                        provider.StatusUnknown,
	stripego.EventTypeRefundUpdated:                        provider.StatusUnknown,
	stripego.EventTypeRefundFailed:                         provider.StatusUnknown,
	stripego.EventTypeChargeDisputeCreated:                 provider.StatusDispute,
	stripego.EventTypeChargeDisputeFundsWithdrawn:          provider.StatusDispute,
	stripego.EventTypeChargeDisputeFundsReinstated:         provider.StatusDispute,
	stripego.EventTypeChargeDisputeClosed:                  provider.StatusDispute,
}

// EventTypes returns the supported event types, sorted; ListEvents asks Stripe for
// exactly these (at most 20 may be named).
func EventTypes() []string {
	out := make([]string, 0, len(eventStatuses))
	for t := range eventStatuses {
		out = append(out, string(t))
	}
	slices.Sort(out)
	return out
}

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status {
	out := make(map[string]provider.Status, len(eventStatuses))
	for t, s := range eventStatuses {
		out[string(t)] = s
	}
	return out
}

// ParseEvent decodes one Stripe event (a webhook body or an element of /v1/events)
// with stripe-go's types. Unknown event types parse with Supported=false as long as
// the envelope is sound, so the receiver can acknowledge them.
func ParseEvent(raw []byte) (provider.Event, error) {
	// The envelope first: id, type, created and api_version read the same in
	// every API version, while the rest of an event rendered in another
	// version may not decode into stripe-go's types at all (before
	// 2017-05-25 "request" was a bare id).
	var env struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Created    json.RawMessage `json:"created"`
		APIVersion string          `json:"api_version"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return provider.Event{}, provider.MalformedEvent("stripe event is not a JSON event object", err)
	}
	if env.ID == "" || env.Type == "" {
		return provider.Event{}, provider.MalformedEvent("stripe event lacks id or type", nil)
	}
	at, err := eventTime(env.Created)
	if err != nil {
		// Stored as status.lastEvent.time, it would be refused by the API
		// server: acknowledged, the event could never be applied.
		return provider.Event{}, provider.MalformedEvent("stripe event "+env.ID, err)
	}
	ev := provider.Event{ID: env.ID, Type: env.Type, OccurredAt: at, Raw: append([]byte(nil), raw...)}
	st, supported := eventStatuses[stripego.EventType(env.Type)]
	ev.Status, ev.Supported = st, supported
	if !supported {
		return ev, nil
	}
	if env.APIVersion != "" && !sameTrain(stripego.APIVersion, env.APIVersion) {
		// An event's data.object is rendered in the API version of its
		// webhook endpoint or account (Stripe, "Versioning" and "Webhook
		// endpoints: api_version"); in another major release (another
		// release name) the same fields can mean other things. It is
		// recorded, not acted on: the status queries (sent in paywarden's
		// version) settle the payment.
		ev.Status, ev.Supported = "", false
		ev.NotActedOn = fmt.Sprintf("stripe event rendered in API version %s; paywarden reads %s: set the webhook endpoint's api_version to %s (docs/providers.md)",
			env.APIVersion, stripego.APIVersion, stripego.APIVersion)
		return ev, nil
	}
	var e stripego.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return provider.Event{}, provider.MalformedEvent("stripe event is not a JSON event object", err)
	}
	if e.Data == nil || len(e.Data.Raw) == 0 || string(e.Data.Raw) == "null" {
		return provider.Event{}, provider.MalformedEvent("stripe event "+e.ID+" has no data.object", nil)
	}
	if err := fillEvent(&ev, e.Type, e.Data.Raw); err != nil {
		return provider.Event{}, provider.MalformedEvent("stripe event "+e.ID+" data.object", err)
	}
	return ev, nil
}

// sameTrain reports whether an event rendered in API version theirs reads
// as ours: the same release name ("2026-02-25.clover" and
// "2026-03-25.clover"). Stripe's monthly releases within a major release
// add only backward-compatible changes ("Versioning": "You can safely
// upgrade to a new monthly release"), and stripe-go's webhook package
// accepts such events the same way; a version without a release name
// (before 2024-09-30.acacia) or a preview release must match exactly.
func sameTrain(ours, theirs string) bool {
	if ours == theirs {
		return true
	}
	_, train, ok := strings.Cut(ours, ".")
	_, theirTrain, theirOK := strings.Cut(theirs, ".")
	return ok && theirOK && train != "preview" && train == theirTrain
}

// eventTime reads an event's created: Unix seconds (a string in the
// RFC 3339 form v2 events use is read too); the zero time when neither. A
// time outside the years 0000-9999 in UTC is an error (provider.StorableTime).
func eventTime(raw json.RawMessage) (time.Time, error) {
	var secs int64
	if err := json.Unmarshal(raw, &secs); err == nil {
		return provider.UnixTime("created", secs)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return provider.StorableTime("created", t)
		}
	}
	return time.Time{}, nil
}

func fillEvent(ev *provider.Event, typ stripego.EventType, obj json.RawMessage) error {
	// own is the object's id: Stripe documents one on every object paywarden
	// acts on (API reference, "The PaymentIntent / Charge / Refund / Dispute
	// object": id, "Unique identifier for the object"), while the link to a
	// payment may be null (a Charge's, Refund's or Dispute's payment_intent,
	// "if one exists": legacy flows create Charges directly).
	var own string
	fromPayment := func(p provider.Payment) {
		ev.PaymentID, ev.CheckoutID, ev.MerchantReference = p.ID, p.CheckoutID, p.MerchantReference
		ev.Amount, ev.Currency, ev.RefundedTotal = p.Amount, p.Currency, p.RefundedTotal
		ev.FailureCode, ev.FailureMessage = p.FailureCode, p.FailureMessage
	}
	switch typ {
	case stripego.EventTypePaymentIntentSucceeded, stripego.EventTypePaymentIntentPaymentFailed,
		stripego.EventTypePaymentIntentProcessing, stripego.EventTypePaymentIntentCanceled,
		stripego.EventTypePaymentIntentAmountCapturableUpdated, stripego.EventTypePaymentIntentRequiresAction:
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(obj, &pi); err != nil {
			return err
		}
		p, err := normalizeIntent(&pi)
		if err != nil {
			return err
		}
		own = pi.ID
		fromPayment(p)
		if typ == stripego.EventTypePaymentIntentCanceled {
			// Canceled or Expired: the cancellation reason decides.
			ev.Status = p.Status
		}
		if typ == stripego.EventTypePaymentIntentPaymentFailed && ev.FailureCode == "" {
			ev.FailureCode = "payment_failed"
		}
	case stripego.EventTypeCheckoutSessionCompleted, stripego.EventTypeCheckoutSessionExpired,
		stripego.EventTypeCheckoutSessionAsyncPaymentSucceeded, stripego.EventTypeCheckoutSessionAsyncPaymentFailed:
		var cs stripego.CheckoutSession
		if err := json.Unmarshal(obj, &cs); err != nil {
			return err
		}
		if cs.ID == "" {
			// Every Checkout Session has an id, cs_... (Stripe API reference, "The
			// Checkout Session object": id is always present), as Create's answer
			// must. An object without one is no session: stored, the event would
			// match no payment and wait Orphaned (and alert) until retention.
			return errors.New("the object carries no Checkout Session id")
		}
		p, err := normalizeSession(&cs)
		if err != nil {
			return err
		}
		own = cs.ID
		fromPayment(p)
		if typ == stripego.EventTypeCheckoutSessionCompleted && cs.PaymentStatus != stripego.CheckoutSessionPaymentStatusPaid {
			// Completed but not paid: an async payment method is settling, or a manual
			// capture waits (payment_intent.amount_capturable_updated says which).
			ev.Status = provider.StatusProcessing
		}
	case stripego.EventTypeChargeRefunded:
		var ch stripego.Charge
		if err := json.Unmarshal(obj, &ch); err != nil {
			return err
		}
		own = ch.ID
		if ch.PaymentIntent != nil {
			ev.PaymentID = ch.PaymentIntent.ID
		}
		ev.MerchantReference, ev.Currency = ch.Metadata[MetadataMerchantReference], isoCurrency(string(ch.Currency))
		var err error
		if ev.Amount, err = FromStripe(ch.Amount, string(ch.Currency)); err != nil {
			return err
		}
		if ev.RefundedTotal, err = FromStripe(ch.AmountRefunded, string(ch.Currency)); err != nil {
			return err
		}
	case stripego.EventTypeRefundCreated, stripego.EventTypeRefundUpdated, stripego.EventTypeRefundFailed:
		var r stripego.Refund
		if err := json.Unmarshal(obj, &r); err != nil {
			return err
		}
		n, err := normalizeRefund(&r)
		if err != nil {
			return err
		}
		own = r.ID
		ev.Refund = &n
		ev.PaymentID, ev.Amount, ev.Currency = n.PaymentID, n.Amount, n.Currency
		ev.FailureCode, ev.FailureMessage = n.FailureCode, n.FailureMessage
	case stripego.EventTypeChargeDisputeCreated, stripego.EventTypeChargeDisputeFundsWithdrawn,
		stripego.EventTypeChargeDisputeFundsReinstated, stripego.EventTypeChargeDisputeClosed:
		var d stripego.Dispute
		if err := json.Unmarshal(obj, &d); err != nil {
			return err
		}
		own = d.ID
		ev.DisputeOutcome = disputeOutcome(typ, d.Status)
		if d.PaymentIntent != nil {
			ev.PaymentID = d.PaymentIntent.ID
		}
		ev.Currency, ev.FailureCode = isoCurrency(string(d.Currency)), string(d.Reason)
		var err error
		if ev.Amount, err = FromStripe(d.Amount, string(d.Currency)); err != nil {
			return err
		}
	}
	if own == "" && !ev.NamesPayment() {
		// No id of its own and no PaymentIntent or merchant reference: no
		// Stripe object, and stored it would match nothing and wait Orphaned
		// until retention. One with its id but no link is a documented object
		// (a charge made without a PaymentIntent) and is kept.
		return errors.New("the object carries no id and names no PaymentIntent or merchant reference")
	}
	return nil
}

// disputeOutcome is how a dispute event says the dispute ended (Stripe, API
// reference, Disputes, status: won, lost, warning_closed; "Disputes > Dispute
// outcomes"): charge.dispute.closed carries it, funds_reinstated means won.
// Everything else is an open dispute ("").
func disputeOutcome(typ stripego.EventType, status stripego.DisputeStatus) string {
	switch {
	case typ == stripego.EventTypeChargeDisputeFundsReinstated:
		return provider.DisputeWon
	case typ != stripego.EventTypeChargeDisputeClosed:
		return ""
	case status == stripego.DisputeStatusLost:
		return provider.DisputeLost
	}
	// won, and warning_closed (an inquiry that never became a chargeback).
	return provider.DisputeWon
}
