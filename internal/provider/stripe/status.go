package stripe

import (
	stripego "github.com/stripe/stripe-go/v84"

	"github.com/paywarden/paywarden/internal/provider"
)

// Metadata keys paywarden writes at Stripe.
const (
	// MetadataMerchantReference holds the merchant reference on the Checkout
	// Session, on its PaymentIntent and on server-side PaymentIntents; the Search API
	// finds a payment by it past the idempotency window.
	MetadataMerchantReference = "merchant_reference"
	// MetadataRefundReference holds paywarden's refund reference on a refund.
	MetadataRefundReference = "reference"
	// MetadataRefundReason holds a refund reason Stripe's enum has no value for.
	MetadataRefundReason = "reason"
)

// FailureAuthorizationExpired is the failure code of a payment whose uncaptured
// authorization Stripe canceled (cancellation_reason "automatic").
const FailureAuthorizationExpired = "AuthorizationExpired"

// normalizeIntent maps a PaymentIntent (latest_charge expanded or not).
//
//	succeeded                  -> Succeeded (amount_received), Refund when the latest
//	                              charge has amount_refunded > 0
//	processing                 -> Processing
//	requires_capture           -> Authorized (amount_capturable; capture_before of the card)
//	requires_payment_method,
//	requires_confirmation      -> Pending; with last_payment_error the failed attempt's
//	                              decline as FailureCode/FailureMessage (not final: the
//	                              payer may try again until the checkout expires)
//	requires_action            -> Pending + CustomerAction when next_action redirects
//	canceled                   -> Canceled; Expired for cancellation_reason automatic
//	                              (authorization expired: FailureCode AuthorizationExpired)
//	                              or expired (its Checkout Session expired)
//	anything else              -> Unknown (never final)
func normalizeIntent(pi *stripego.PaymentIntent) (provider.Payment, error) {
	p := provider.Payment{
		ID: pi.ID, MerchantReference: pi.Metadata[MetadataMerchantReference],
		RawStatus: string(pi.Status), Currency: isoCurrency(string(pi.Currency)),
	}
	stripeAmount := pi.Amount
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		p.Status = provider.StatusSucceeded
		stripeAmount = pi.AmountReceived
		if ch := pi.LatestCharge; ch != nil && ch.AmountRefunded > 0 {
			p.Status = provider.StatusRefund
			refunded, err := FromStripe(ch.AmountRefunded, string(pi.Currency))
			if err != nil {
				return provider.Payment{}, err
			}
			p.RefundedTotal = refunded
		}
	case stripego.PaymentIntentStatusProcessing:
		p.Status = provider.StatusProcessing
	case stripego.PaymentIntentStatusRequiresCapture:
		p.Status = provider.StatusAuthorized
		stripeAmount = pi.AmountCapturable
		if ch := pi.LatestCharge; ch != nil && ch.PaymentMethodDetails != nil && ch.PaymentMethodDetails.Card != nil && ch.PaymentMethodDetails.Card.CaptureBefore > 0 {
			at, err := provider.UnixTime("capture_before", ch.PaymentMethodDetails.Card.CaptureBefore)
			if err != nil {
				return provider.Payment{}, err
			}
			p.AuthorizationExpiresAt = at
		}
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation:
		p.Status = provider.StatusPending
		if e := pi.LastPaymentError; e != nil {
			p.FailureCode, p.FailureMessage = declineCode(e), e.Msg
		}
	case stripego.PaymentIntentStatusRequiresAction:
		p.Status = provider.StatusPending
		if na := pi.NextAction; na != nil && na.RedirectToURL != nil && na.RedirectToURL.URL != "" {
			p.CustomerAction = &provider.CustomerAction{URL: na.RedirectToURL.URL}
		}
	case stripego.PaymentIntentStatusCanceled:
		switch pi.CancellationReason {
		case stripego.PaymentIntentCancellationReasonAutomatic:
			p.Status, p.FailureCode = provider.StatusExpired, FailureAuthorizationExpired
			p.FailureMessage = "the uncaptured authorization expired"
		case stripego.PaymentIntentCancellationReasonExpired:
			p.Status = provider.StatusExpired
		default:
			p.Status = provider.StatusCanceled
			p.FailureMessage = string(pi.CancellationReason)
		}
	default:
		p.Status = provider.StatusUnknown
	}
	amount, err := FromStripe(stripeAmount, string(pi.Currency))
	if err != nil {
		return provider.Payment{}, err
	}
	p.Amount = amount
	return p, nil
}

// declineCode is the most specific code of a payment error: the card's decline code
// (insufficient_funds) over the generic error code (card_declined).
func declineCode(e *stripego.Error) string {
	if e.DeclineCode != "" {
		return string(e.DeclineCode)
	}
	return string(e.Code)
}

// normalizeSession maps a Checkout Session. With its PaymentIntent (expanded) the
// intent decides, except that an expired session whose intent took no money is
// Expired; ID is the PaymentIntent's id and CheckoutID the session's. Without one
// (the payer has not tried to pay yet) ID is the session id:
//
//	open                      -> Pending + CustomerAction{url, expires_at}
//	complete, payment paid    -> Succeeded (amount_total)
//	complete, unpaid          -> Processing (an async payment method is settling)
//	expired                   -> Expired
//	anything else             -> Unknown
func normalizeSession(cs *stripego.CheckoutSession) (provider.Payment, error) {
	ref := cs.Metadata[MetadataMerchantReference]
	if ref == "" {
		ref = cs.ClientReferenceID
	}
	var action *provider.CustomerAction
	if cs.Status == stripego.CheckoutSessionStatusOpen && cs.URL != "" {
		action = &provider.CustomerAction{URL: cs.URL}
		if cs.ExpiresAt > 0 {
			at, err := provider.UnixTime("expires_at", cs.ExpiresAt)
			if err != nil {
				return provider.Payment{}, err
			}
			action.ExpiresAt = at
		}
	}
	if pi := cs.PaymentIntent; pi != nil && pi.ID != "" && pi.Status != "" {
		p, err := normalizeIntent(pi)
		if err != nil {
			return provider.Payment{}, err
		}
		p.CheckoutID = cs.ID
		if p.MerchantReference == "" {
			p.MerchantReference = ref
		}
		switch {
		case cs.Status == stripego.CheckoutSessionStatusExpired && (p.Status == provider.StatusPending || p.Status == provider.StatusUnknown):
			p.Status, p.CustomerAction = provider.StatusExpired, nil
			p.RawStatus = "session expired/" + p.RawStatus
		case p.Status == provider.StatusPending && action != nil && p.CustomerAction == nil:
			// The payer's attempt failed (or was not made yet): the session's page is
			// still where they can pay.
			p.CustomerAction = action
		}
		return p, nil
	}
	p := provider.Payment{
		ID: cs.ID, CheckoutID: cs.ID, MerchantReference: ref,
		RawStatus: string(cs.Status) + "/" + string(cs.PaymentStatus), Currency: isoCurrency(string(cs.Currency)),
	}
	if pi := cs.PaymentIntent; pi != nil && pi.ID != "" {
		// The intent exists but was not expanded: it is the payment's id.
		p.ID = pi.ID
	}
	switch cs.Status {
	case stripego.CheckoutSessionStatusOpen:
		p.Status, p.CustomerAction = provider.StatusPending, action
	case stripego.CheckoutSessionStatusComplete:
		switch cs.PaymentStatus {
		case stripego.CheckoutSessionPaymentStatusPaid:
			p.Status = provider.StatusSucceeded
		case stripego.CheckoutSessionPaymentStatusUnpaid:
			p.Status = provider.StatusProcessing
		default:
			p.Status = provider.StatusUnknown
		}
	case stripego.CheckoutSessionStatusExpired:
		p.Status = provider.StatusExpired
	default:
		p.Status = provider.StatusUnknown
	}
	if cs.Currency != "" {
		amount, err := FromStripe(cs.AmountTotal, string(cs.Currency))
		if err != nil {
			return provider.Payment{}, err
		}
		p.Amount = amount
	}
	return p, nil
}

// normalizeRefund maps a refund.
//
//	pending, requires_action -> Pending
//	succeeded                -> Succeeded
//	failed, canceled         -> Failed (FailureCode = failure_reason)
//	anything else            -> Unknown
func normalizeRefund(r *stripego.Refund) (provider.Refund, error) {
	out := provider.Refund{
		ID: r.ID, Reference: r.Metadata[MetadataRefundReference], RawStatus: string(r.Status),
		Currency: isoCurrency(string(r.Currency)),
	}
	if r.PaymentIntent != nil {
		out.PaymentID = r.PaymentIntent.ID
	}
	switch r.Status {
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		out.Status = provider.RefundPending
	case stripego.RefundStatusSucceeded:
		out.Status = provider.RefundSucceeded
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		out.Status = provider.RefundFailed
		out.FailureCode = string(r.FailureReason)
		if out.FailureCode == "" {
			out.FailureCode = string(r.Status)
		}
	default:
		out.Status = provider.RefundUnknown
	}
	amount, err := FromStripe(r.Amount, string(r.Currency))
	if err != nil {
		return provider.Refund{}, err
	}
	out.Amount = amount
	return out, nil
}
