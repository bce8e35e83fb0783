package stripe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/paywarden/paywarden/internal/provider"
)

// Authorize is not a step at Stripe: the payer's confirmation authorizes (manual
// capture) or charges (automatic capture) in one go (Lifecycle.AuthorizeStep false).
func (a *Adapter) Authorize(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.name, "authorize")
}

// Capture implements provider.Provider: POST /v1/payment_intents/{id}/capture with
// amount_to_capture for a partial capture (Stripe releases the rest). A PaymentIntent
// that is no longer capturable because it was captured already (a replay after a
// crash with another key, a capture from the Dashboard) is not an error: its current
// state is returned.
func (a *Adapter) Capture(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "capture"
	p := &stripego.PaymentIntentCaptureParams{}
	if req.Amount > 0 {
		amount, err := ToStripe(req.Amount, req.Currency)
		if err != nil {
			return provider.Payment{}, notRepresentable(a.name, op, err)
		}
		p.AmountToCapture = stripego.Int64(amount)
	}
	ctx, cancel := a.call(ctx)
	defer cancel()
	id, err := a.intentID(ctx, op, req.PaymentID)
	if err != nil {
		return provider.Payment{}, err
	}
	p.Params = params(ctx, req.IdempotencyKey, "latest_charge")
	pi, err := a.sc.V1PaymentIntents.Capture(ctx, id, p)
	if err != nil {
		cerr := a.classify(ctx, op, callWrite, err)
		if refused(cerr) {
			// Refused: "already captured" is an answer, not an error.
			if cur, gerr := a.Get(ctx, id); gerr == nil && tookMoney(cur.Status) {
				return cur, nil
			}
		}
		return provider.Payment{}, cerr
	}
	return a.intentPayment(op, callWrite, pi)
}

// Cancel implements provider.Provider. A PaymentIntent is canceled (its authorization
// voided) with the reason when Stripe's enum has it. Stripe refuses to cancel the
// PaymentIntent of an open Checkout Session, so such a payment is canceled by
// expiring its session (also when Cancel gets the session id); the answer is then
// Canceled, although later reads of the session say Expired. A payment already
// canceled or expired is returned as it is; one that took money is refused
// (NonRetryable).
func (a *Adapter) Cancel(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "cancel"
	ctx, cancel := a.call(ctx)
	defer cancel()
	if !isSession(req.PaymentID) {
		return a.cancelIntent(ctx, req, req.PaymentID, true)
	}
	cs, err := a.getSession(ctx, req.PaymentID)
	if err != nil {
		return provider.Payment{}, withOp(err, op)
	}
	switch {
	case cs.Status == stripego.CheckoutSessionStatusOpen:
		return a.expireSession(ctx, req, cs)
	case cs.PaymentIntent != nil && cs.PaymentIntent.ID != "":
		return a.cancelIntent(ctx, req, cs.PaymentIntent.ID, false)
	}
	// A closed session without a PaymentIntent took no money and cannot take any.
	p, err := normalizeSession(cs)
	if err != nil {
		return provider.Payment{}, a.answerError(op, callRead, cs.LastResponse, err)
	}
	return p, nil
}

func (a *Adapter) cancelIntent(ctx context.Context, req provider.ActionRequest, id string, sessionFallback bool) (provider.Payment, error) {
	const op = "cancel"
	p := &stripego.PaymentIntentCancelParams{Params: params(ctx, req.IdempotencyKey, "latest_charge")}
	if r := cancellationReason(req.Reason); r != "" {
		p.CancellationReason = stripego.String(r)
	}
	pi, err := a.sc.V1PaymentIntents.Cancel(ctx, id, p)
	if err == nil {
		return a.intentPayment(op, callWrite, pi)
	}
	cerr := a.classify(ctx, op, callWrite, err)
	if !refused(cerr) {
		return provider.Payment{}, cerr
	}
	// Refused: "already canceled" is an answer, not an error.
	if cur, gerr := a.Get(ctx, id); gerr == nil && closed(cur.Status) {
		return cur, nil
	}
	if sessionFallback {
		// Refused: is this the PaymentIntent of a Checkout Session that is still open?
		cs, lerr := a.openSession(ctx, id)
		if lerr != nil {
			return provider.Payment{}, withOp(lerr, op)
		}
		if cs != nil {
			return a.expireSession(ctx, req, cs)
		}
	}
	return provider.Payment{}, cerr
}

// openSession returns the open Checkout Session a PaymentIntent belongs to, nil when
// there is none: GET /v1/checkout/sessions?payment_intent=.
func (a *Adapter) openSession(ctx context.Context, piID string) (*stripego.CheckoutSession, error) {
	lp := &stripego.CheckoutSessionListParams{
		ListParams:    stripego.ListParams{Limit: stripego.Int64(1), Single: true, Context: ctx},
		PaymentIntent: stripego.String(piID),
	}
	for cs, err := range a.sc.V1CheckoutSessions.List(ctx, lp) {
		if err != nil {
			return nil, a.classify(ctx, "list sessions", callList, err)
		}
		if cs.Status == stripego.CheckoutSessionStatusOpen {
			return cs, nil
		}
		break
	}
	return nil, nil
}

// expireSession cancels the payment of an open Checkout Session by expiring it.
func (a *Adapter) expireSession(ctx context.Context, req provider.ActionRequest, session *stripego.CheckoutSession) (provider.Payment, error) {
	const op = "cancel"
	// Its own key: Stripe ties a key to one endpoint, and the cancel's key may
	// already have been spent on the refused PaymentIntent cancel.
	key := derivedKey(req.IdempotencyKey, "expire-session")
	cs, err := a.sc.V1CheckoutSessions.Expire(ctx, session.ID, &stripego.CheckoutSessionExpireParams{Params: params(ctx, key)})
	if err != nil {
		cerr := a.classify(ctx, op, callWrite, err)
		if refused(cerr) {
			if cur, gerr := a.Get(ctx, session.ID); gerr == nil && closed(cur.Status) {
				return cur, nil
			}
		}
		return provider.Payment{}, cerr
	}
	p, err := normalizeSession(cs)
	if err == nil && cs.ID == "" {
		err = errors.New("the answer carries no Checkout Session id")
	}
	if err != nil {
		return provider.Payment{}, a.answerError(op, callWrite, cs.LastResponse, err)
	}
	if pi := session.PaymentIntent; p.ID == session.ID && pi != nil && pi.ID != "" {
		p.ID = pi.ID
	}
	p.Status, p.CustomerAction, p.RawStatus = provider.StatusCanceled, nil, "session expired by cancel"
	p.FailureCode, p.FailureMessage = "", ""
	return p, nil
}

// cancellationReason maps the merchant's reason onto Stripe's PaymentIntent enum
// (duplicate, fraudulent, requested_by_customer, abandoned); "" when it has none.
func cancellationReason(reason string) string {
	switch r := enumWord(reason); r {
	case "duplicate", "fraudulent", "requested_by_customer", "abandoned":
		return r
	}
	return ""
}

// refundReason maps the merchant's reason onto Stripe's refund enum (duplicate,
// fraudulent, requested_by_customer); "" when it has none.
func refundReason(reason string) string {
	switch r := enumWord(reason); r {
	case "duplicate", "fraudulent", "requested_by_customer":
		return r
	}
	return ""
}

// enumWord folds "Requested by customer" and "requested-by-customer" into
// "requested_by_customer".
func enumWord(s string) string {
	return strings.NewReplacer(" ", "_", "-", "_").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// derivedKey is a deterministic idempotency key for a second call made on behalf of
// the request with key (empty stays empty: stripe-go then makes a random one). Stripe
// takes at most 255 characters; a longer key is replaced by its SHA-256.
func derivedKey(key, suffix string) string {
	if key == "" {
		return ""
	}
	k := key + ":" + suffix
	if len(k) > 255 {
		sum := sha256.Sum256([]byte(k))
		k = hex.EncodeToString(sum[:])
	}
	return k
}

// refused reports Stripe's definitive "no" to an action: the state of the payment
// may say why (already captured, already canceled). Which error code Stripe uses
// for each case is not relied on: the payment is read back instead.
func refused(err error) bool { return errors.Is(err, provider.ErrNonRetryable) }

// closed reports the statuses of a payment that can take no money any more.
func closed(s provider.Status) bool {
	return s == provider.StatusCanceled || s == provider.StatusExpired || s == provider.StatusFailed
}

// tookMoney reports the statuses of a captured payment.
func tookMoney(s provider.Status) bool {
	return s == provider.StatusSucceeded || s == provider.StatusRefund || s == provider.StatusDispute || s == provider.StatusProcessing
}

// intentID resolves a Checkout Session id to its PaymentIntent id.
func (a *Adapter) intentID(ctx context.Context, op, id string) (string, error) {
	if !isSession(id) {
		return id, nil
	}
	cs, err := a.getSession(ctx, id)
	if err != nil {
		return "", withOp(err, op)
	}
	if cs.PaymentIntent == nil || cs.PaymentIntent.ID == "" {
		return "", &provider.Error{Provider: a.name, Op: op, Class: provider.ErrNonRetryable, Detail: "checkout session " + id + " has no PaymentIntent yet: the payer has not paid"}
	}
	return cs.PaymentIntent.ID, nil
}

// withOp renames the operation of a classified error (a read done for an action).
func withOp(err error, op string) error {
	var pe *provider.Error
	if errors.As(err, &pe) {
		c := *pe
		c.Op = op
		return &c
	}
	return err
}

// CreateRefund implements provider.Provider: POST /v1/refunds for the PaymentIntent,
// with paywarden's reference in metadata (FindRefund searches it) and the reason in
// Stripe's enum, or in metadata when the enum has no such value.
func (a *Adapter) CreateRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	const op = "create refund"
	amount, err := ToStripe(req.Amount, req.Currency)
	if err != nil {
		return provider.Refund{}, notRepresentable(a.name, op, err)
	}
	ctx, cancel := a.call(ctx)
	defer cancel()
	id, err := a.intentID(ctx, op, req.PaymentID)
	if err != nil {
		return provider.Refund{}, err
	}
	p := &stripego.RefundCreateParams{
		Params:        params(ctx, req.IdempotencyKey),
		PaymentIntent: stripego.String(id),
		Metadata:      map[string]string{MetadataRefundReference: req.Reference},
	}
	if amount > 0 {
		p.Amount = stripego.Int64(amount) // none: the whole refundable rest
	}
	if r := refundReason(req.Reason); r != "" {
		p.Reason = stripego.String(r)
	} else if req.Reason != "" {
		p.Metadata[MetadataRefundReason] = truncate(req.Reason, 500)
	}
	r, err := a.sc.V1Refunds.Create(ctx, p)
	if err != nil {
		return provider.Refund{}, a.classify(ctx, op, callWrite, err)
	}
	return a.refund(op, callWrite, r)
}

// GetRefund implements provider.Provider: GET /v1/refunds/{id}. A refund of
// another payment than paymentID (another PaymentIntent than paymentID's, or a
// refund of no PaymentIntent) is ErrNotFound: paymentID has no such refund, and
// the answer must never settle a Refund with someone else's money.
func (a *Adapter) GetRefund(ctx context.Context, paymentID, refundID string) (provider.Refund, error) {
	const op = "get refund"
	if refundID == "" {
		return provider.Refund{}, &provider.Error{Provider: a.name, Op: op, Class: provider.ErrNonRetryable, Detail: "empty refund id"}
	}
	ctx, cancel := a.call(ctx)
	defer cancel()
	r, err := a.sc.V1Refunds.Retrieve(ctx, refundID, &stripego.RefundRetrieveParams{Params: params(ctx, "")})
	if err != nil {
		return provider.Refund{}, a.classify(ctx, op, callRead, err)
	}
	out, err := a.refund(op, callRead, r)
	if err != nil {
		return provider.Refund{}, err
	}
	if err := a.refundOf(ctx, op, paymentID, out); err != nil {
		return provider.Refund{}, err
	}
	return out, nil
}

// refundOf checks that refund r belongs to paymentID (a PaymentIntent, or a
// Checkout Session whose PaymentIntent is read); no payment named: no check.
func (a *Adapter) refundOf(ctx context.Context, op, paymentID string, r provider.Refund) error {
	if paymentID == "" {
		return nil
	}
	intent, err := a.intentID(ctx, op, paymentID)
	if err != nil {
		return err
	}
	if r.PaymentID != intent {
		owner := r.PaymentID
		if owner == "" {
			owner = "no PaymentIntent"
		}
		return &provider.Error{Provider: a.name, Op: op, Class: provider.ErrNotFound, Detail: "refund " + r.ID + " belongs to " + owner + ", not " + paymentID}
	}
	return nil
}

// FindRefund implements provider.Provider: GET /v1/refunds?payment_intent= (all
// pages), matching metadata.reference.
func (a *Adapter) FindRefund(ctx context.Context, paymentID, reference string) (provider.Refund, error) {
	const op = "find refund"
	ctx, cancel := a.call(ctx)
	defer cancel()
	id, err := a.intentID(ctx, op, paymentID)
	if err != nil {
		return provider.Refund{}, err
	}
	lp := &stripego.RefundListParams{
		ListParams:    stripego.ListParams{Limit: stripego.Int64(100), Context: ctx},
		PaymentIntent: stripego.String(id),
	}
	for r, err := range a.sc.V1Refunds.List(ctx, lp) {
		if err != nil {
			return provider.Refund{}, a.classify(ctx, op, callList, err)
		}
		if r.Metadata[MetadataRefundReference] == reference {
			return a.refund(op, callList, r)
		}
	}
	return provider.Refund{}, &provider.Error{Provider: a.name, Op: op, Class: provider.ErrNotFound, Detail: "no refund of " + id + " with reference " + reference}
}

// refund normalizes a refund answer to a call of kind.
func (a *Adapter) refund(op string, kind callKind, r *stripego.Refund) (provider.Refund, error) {
	out, err := normalizeRefund(r)
	if err == nil && kind == callWrite && r.ID == "" {
		err = errors.New("the answer carries no refund id")
	}
	if err != nil {
		return provider.Refund{}, a.answerError(op, kind, r.LastResponse, err)
	}
	return out, nil
}
