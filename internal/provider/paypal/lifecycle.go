package paypal

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// actionHeader is the header of a money-moving call: PayPal-Request-Id makes a repeated
// call (after a timeout or a lost answer) replay the first answer instead of acting
// twice, and the full representation is asked for so the answer can be normalized.
func actionHeader(key string) http.Header {
	h := http.Header{}
	if key != "" {
		h.Set(HeaderRequestID, key)
	}
	h.Set("Prefer", "return=representation")
	return h
}

// refuse is the error for a call refused before (or instead of) a request: a definitive
// answer about the payment, with code naming the reason.
func (a *Adapter) refuse(op, code, detail string) error {
	return &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Code: code, Detail: detail}
}

func orderPath(id string) string { return "/v2/checkout/orders/" + url.PathEscape(id) }

// getOrder reads the raw order (Get normalizes it).
func (a *Adapter) getOrder(ctx context.Context, op, id string) (Order, error) {
	if id == "" {
		return Order{}, a.refuse(op, "", "empty order id")
	}
	var o Order
	err := a.do(ctx, provider.Request{Op: op, Method: http.MethodGet, Path: orderPath(id), NotFound: true}, &o)
	return o, err
}

// Authorize implements provider.Provider for orders with intent AUTHORIZE:
// POST /v2/checkout/orders/{id}/authorize with PayPal-Request-Id = req.IdempotencyKey.
// The answer is the order, COMPLETED with an authorization: Authorized. An order that
// is already authorized (ORDER_ALREADY_AUTHORIZED) is not an error: its current state
// is returned as Get reads it; nor is INSTRUMENT_DECLINED (payerMustApproveAgain). Any
// other refusal (ORDER_NOT_APPROVED, intent CAPTURE) is ErrNonRetryable with PayPal's
// issue as the error's Code.
func (a *Adapter) Authorize(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	if req.PaymentID == "" {
		return provider.Payment{}, a.refuse("authorize", "", "empty order id")
	}
	return a.orderAction(ctx, "authorize", IssueOrderAlreadyAuthorized, req)
}

// orderAction posts the order action op (authorize or capture) of req. The
// issue done (the order already had it) is not an error: the order is
// returned as Get reads it; nor is INSTRUMENT_DECLINED (payerMustApproveAgain).
func (a *Adapter) orderAction(ctx context.Context, op, done string, req provider.ActionRequest) (provider.Payment, error) {
	var out Order
	err := a.do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: orderPath(req.PaymentID) + "/" + op,
		Header: actionHeader(req.IdempotencyKey), JSON: struct{}{}, NotFound: true, ConflictRetryable: true,
	}, &out)
	switch errorCode(err) {
	case done:
		return a.Get(ctx, req.PaymentID)
	case IssueInstrumentDeclined:
		return a.payerMustApproveAgain(ctx, op, req.PaymentID)
	}
	if err != nil {
		return provider.Payment{}, err
	}
	return a.writtenOrder(op, out)
}

// payerMustApproveAgain is the answer to an order capture or authorization
// PayPal refused INSTRUMENT_DECLINED: the payer's funding source failed, and
// the payment is restarted so the payer can choose another ("If your payer's
// funding source fails, the Orders API returns an INSTRUMENT_DECLINED error
// ... restart the payment", PayPal developer docs, "Handle funding failures").
// Nothing was taken or reserved. The order is read again for the payer's link
// and reported Pending, waiting for the payer, with FailureCode
// INSTRUMENT_DECLINED and RawStatus "<order status>/INSTRUMENT_DECLINED",
// whatever status the order reads. The core sends the payment back to the
// payer; their next approval leads to a new capture.
func (a *Adapter) payerMustApproveAgain(ctx context.Context, op, id string) (provider.Payment, error) {
	o, err := a.getOrder(ctx, op, id)
	if err != nil {
		return provider.Payment{}, err
	}
	p := NormalizeOrder(o)
	p.Status, p.RawStatus, p.FailureCode = provider.StatusPending, o.Status+"/"+IssueInstrumentDeclined, IssueInstrumentDeclined
	p.FailureMessage = "the payer's funding source was declined; the payer must approve again with another one"
	if href := linkHref(o.Links, RelPayerAction, RelApprove); p.CustomerAction == nil && href != "" {
		p.CustomerAction = &provider.CustomerAction{URL: href}
	}
	return p, nil
}

// Capture implements provider.Provider. It reads the order once to know what to call:
//
//   - APPROVED with intent CAPTURE: POST /v2/checkout/orders/{id}/capture. Such an order
//     is captured in full; a req.Amount other than the order's is refused.
//   - COMPLETED with an authorization (intent AUTHORIZE): POST
//     /v2/payments/authorizations/{authorization id}/capture with the amount (req.Amount,
//     or the whole authorization when 0) and final_capture, so a partial capture
//     releases the rest. An amount above the authorized one is refused before the call.
//   - already captured (the order has a capture): no call, the order's state.
//
// Both calls carry PayPal-Request-Id = req.IdempotencyKey. PayPal's "already captured"
// answers (ORDER_ALREADY_CAPTURED, AUTHORIZATION_ALREADY_CAPTURED: a concurrent or
// earlier capture won) are not errors either: the order is returned as Get reads it.
// Neither is INSTRUMENT_DECLINED on an order capture: the payer must approve again
// (payerMustApproveAgain), the order is returned Pending.
// An order the payer has not approved, an approved AUTHORIZE order that was not
// authorized yet, and a voided, expired or denied authorization are refused
// (ErrNonRetryable).
func (a *Adapter) Capture(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "capture"
	if req.Amount < 0 {
		return provider.Payment{}, a.refuse(op, "", "negative capture amount")
	}
	if req.Amount > 0 && req.Currency != "" {
		// Refused before any request: nothing PayPal says makes it sendable.
		if _, err := ToMoney(req.Amount, req.Currency); err != nil {
			return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Err: err}
		}
	}
	o, err := a.getOrder(ctx, op, req.PaymentID)
	if err != nil {
		return provider.Payment{}, err
	}
	current := NormalizeOrder(o)
	if _, captured := lastCapture(o); captured {
		return current, nil
	}
	switch o.Status {
	case "APPROVED":
		if o.Intent == IntentAuthorize {
			return provider.Payment{}, a.refuse(op, IssueActionDoesNotMatchIntent, "order "+o.ID+" has intent AUTHORIZE and is not authorized yet: authorize it first")
		}
		if req.Amount > 0 && req.Amount != current.Amount {
			return provider.Payment{}, a.refuse(op, "", "an order with intent CAPTURE is captured in full; a partial capture needs intent AUTHORIZE (manual capture)")
		}
		return a.captureOrder(ctx, req)
	case "COMPLETED":
		au, ok := lastAuthorization(o)
		if !ok {
			return provider.Payment{}, a.refuse(op, "", "order "+o.ID+" is COMPLETED without an authorization or capture")
		}
		switch au.Status {
		case "CREATED", "PENDING":
			return a.captureAuthorization(ctx, req, o, au)
		case "CAPTURED", "PARTIALLY_CAPTURED":
			return current, nil
		default:
			return provider.Payment{}, a.refuse(op, "AUTHORIZATION_"+au.Status, "authorization "+au.ID+" is "+au.Status+" and cannot be captured")
		}
	case "CREATED", "SAVED", "PAYER_ACTION_REQUIRED":
		return provider.Payment{}, a.refuse(op, IssueOrderNotApproved, "the payer has not approved order "+o.ID)
	default:
		return provider.Payment{}, a.refuse(op, "", "order "+o.ID+" is "+o.Status+": nothing to capture")
	}
}

func (a *Adapter) captureOrder(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	return a.orderAction(ctx, "capture", IssueOrderAlreadyCaptured, req)
}

func (a *Adapter) captureAuthorization(ctx context.Context, req provider.ActionRequest, o Order, au Authorization) (provider.Payment, error) {
	const op = "capture"
	body := CaptureAuthorizationRequest{FinalCapture: true}
	if req.Amount > 0 {
		cur := req.Currency
		if cur == "" {
			cur = au.Amount.CurrencyCode
		}
		if cur != au.Amount.CurrencyCode {
			return provider.Payment{}, a.refuse(op, IssueCurrencyMismatch, "capture in "+cur+" of an authorization in "+au.Amount.CurrencyCode)
		}
		authorized, err := ParseAmount(au.Amount.Value, au.Amount.CurrencyCode)
		if err != nil {
			return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Err: err}
		}
		if req.Amount > authorized {
			return provider.Payment{}, a.refuse(op, IssueMaxCaptureAmountExceeded, "capture amount exceeds the authorized amount")
		}
		m, err := ToMoney(req.Amount, cur)
		if err != nil {
			return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Err: err}
		}
		body.Amount = &m
	}
	var c Capture
	err := a.do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: "/v2/payments/authorizations/" + url.PathEscape(au.ID) + "/capture",
		Header: actionHeader(req.IdempotencyKey), JSON: body, NotFound: true, ConflictRetryable: true,
	}, &c)
	if errorCode(err) == IssueAuthorizationAlreadyCaptured {
		return a.Get(ctx, req.PaymentID)
	}
	if err != nil {
		return provider.Payment{}, err
	}
	if c.ID == "" {
		return provider.Payment{}, provider.NoID(a.c.Name(), op, "capture")
	}
	// The answer is the capture, not the order: put it where a fresh read of the order
	// would show it, so the result is normalized exactly like Get's.
	return NormalizeOrder(withCapture(o, au.ID, c)), nil
}

// withCapture returns o with capture c added to the purchase unit of authorization
// authID, that authorization marked captured.
func withCapture(o Order, authID string, c Capture) Order {
	units := append([]PurchaseUnit(nil), o.PurchaseUnits...)
	for i := range units {
		if units[i].Payments == nil {
			continue
		}
		pay := *units[i].Payments
		pay.Authorizations = append([]Authorization(nil), pay.Authorizations...)
		found := false
		for j := range pay.Authorizations {
			if pay.Authorizations[j].ID == authID {
				pay.Authorizations[j].Status, found = "CAPTURED", true
			}
		}
		if !found {
			continue
		}
		pay.Captures = append(append([]Capture(nil), pay.Captures...), c)
		units[i].Payments = &pay
		o.PurchaseUnits = units
		return o
	}
	return o
}

// Cancel implements provider.Provider. It reads the order once:
//
//   - authorized (intent AUTHORIZE, not captured): POST
//     /v2/payments/authorizations/{authorization id}/void with PayPal-Request-Id; the
//     result is Canceled. PREVIOUSLY_VOIDED is not an error (the order's state is
//     returned).
//   - not approved or not authorized yet (CREATED, SAVED, PAYER_ACTION_REQUIRED,
//     APPROVED): PayPal has no API to cancel an order, and it takes no money without
//     the merchant's capture or authorize call, which paywarden will no longer make.
//     The order is returned Canceled with RawStatus "<order status>/abandoned",
//     without a request.
//   - already voided, expired, denied or declined: no money moved and nothing to
//     cancel; the order's state is returned.
//   - captured (or capture pending): refused with ErrNonRetryable: refund instead.
//
// req.Reason is not sent: PayPal's void takes none.
func (a *Adapter) Cancel(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "cancel"
	o, err := a.getOrder(ctx, op, req.PaymentID)
	if err != nil {
		return provider.Payment{}, err
	}
	current := NormalizeOrder(o)
	if _, captured := lastCapture(o); captured {
		if current.Status == provider.StatusFailed {
			return current, nil
		}
		return provider.Payment{}, a.refuse(op, IssuePreviouslyCaptured, "order "+o.ID+" was captured ("+current.RawStatus+"): refund instead")
	}
	switch o.Status {
	case "CREATED", "SAVED", "PAYER_ACTION_REQUIRED", "APPROVED":
		current.Status, current.RawStatus, current.CustomerAction = provider.StatusCanceled, o.Status+"/abandoned", nil
		return current, nil
	case "VOIDED", "EXPIRED":
		return current, nil
	case "COMPLETED":
	default:
		return provider.Payment{}, a.refuse(op, "", "order "+o.ID+" is "+o.Status+": cannot tell whether money moved")
	}
	au, ok := lastAuthorization(o)
	if !ok {
		return provider.Payment{}, a.refuse(op, "", "order "+o.ID+" is COMPLETED without an authorization or capture: cannot tell whether money moved")
	}
	switch au.Status {
	case "CREATED", "PENDING":
	case "VOIDED", "EXPIRED", "DENIED":
		return current, nil
	default:
		return provider.Payment{}, a.refuse(op, IssuePreviouslyCaptured, "authorization "+au.ID+" is "+au.Status+": refund instead")
	}
	// No body is decoded: PayPal answers 204 (minimal) or 200 with the authorization,
	// and what matters, VOIDED, is known once the call succeeded.
	err = a.do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: "/v2/payments/authorizations/" + url.PathEscape(au.ID) + "/void",
		Header: actionHeader(req.IdempotencyKey), NotFound: true, ConflictRetryable: true,
	}, nil)
	switch errorCode(err) {
	case IssuePreviouslyVoided, IssueAuthorizationVoided, IssueAuthorizationExpired:
		return a.Get(ctx, req.PaymentID)
	case IssuePreviouslyCaptured:
		return provider.Payment{}, err
	}
	if err != nil {
		return provider.Payment{}, err
	}
	return NormalizeOrder(withAuthorizationStatus(o, au.ID, "VOIDED")), nil
}

// withAuthorizationStatus returns o with authorization authID in status st.
func withAuthorizationStatus(o Order, authID, st string) Order {
	units := append([]PurchaseUnit(nil), o.PurchaseUnits...)
	for i := range units {
		if units[i].Payments == nil {
			continue
		}
		pay := *units[i].Payments
		pay.Authorizations = append([]Authorization(nil), pay.Authorizations...)
		for j := range pay.Authorizations {
			if pay.Authorizations[j].ID == authID {
				pay.Authorizations[j].Status = st
			}
		}
		units[i].Payments = &pay
	}
	o.PurchaseUnits = units
	return o
}

// CreateRefund implements provider.Provider: POST
// /v2/payments/captures/{capture id}/refund with PayPal-Request-Id =
// req.IdempotencyKey, the amount in PayPal's decimals (omitted when req.Amount is 0:
// the rest of the capture), invoice_id = req.Reference, custom_id = req.MerchantReference
// (the order's own when empty) and note_to_payer = req.Reason. The capture is
// req.CaptureID; without one the order is read for it first, and an order without a
// capture, or a refund in another currency than its capture's, is refused before the
// refund call. The refund call is the same either way.
//
// What is left to refund is not checked here against the order: after a lost answer
// the retry must reach PayPal, which replays the first refund for the same
// PayPal-Request-Id, where a local check would see the money already refunded and
// refuse. PayPal refuses an over-refund itself (REFUND_AMOUNT_EXCEEDED,
// CAPTURE_FULLY_REFUNDED: ErrNonRetryable).
func (a *Adapter) CreateRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	const op = "create refund"
	if req.Amount < 0 {
		return provider.Refund{}, a.refuse(op, "", "negative refund amount")
	}
	var amount *Money
	if req.Amount > 0 {
		m, err := ToMoney(req.Amount, req.Currency)
		if err != nil {
			return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Err: err}
		}
		amount = &m
	}
	captureID, merchantRef := req.CaptureID, req.MerchantReference
	if captureID == "" {
		o, err := a.getOrder(ctx, op, req.PaymentID)
		if err != nil {
			return provider.Refund{}, err
		}
		c, ok := lastCapture(o)
		if !ok || c.ID == "" {
			return provider.Refund{}, a.refuse(op, "", "order "+o.ID+" has no capture to refund")
		}
		if amount != nil && amount.CurrencyCode != c.Amount.CurrencyCode {
			return provider.Refund{}, a.refuse(op, IssueCurrencyMismatch, "refund in "+amount.CurrencyCode+" of a capture in "+c.Amount.CurrencyCode)
		}
		captureID, merchantRef = c.ID, cmp.Or(merchantRef, NormalizeOrder(o).MerchantReference)
	}
	var out Refund
	err := a.do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: "/v2/payments/captures/" + url.PathEscape(captureID) + "/refund",
		Header: actionHeader(req.IdempotencyKey), NotFound: true, ConflictRetryable: true,
		JSON: RefundCaptureRequest{
			Amount: amount, InvoiceID: req.Reference, CustomID: merchantRef,
			NoteToPayer: req.Reason,
		},
	}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	if out.ID == "" {
		return provider.Refund{}, provider.NoID(a.c.Name(), op, "refund")
	}
	r := NormalizeRefund(out, req.PaymentID)
	if r.Reference == "" {
		r.Reference = req.Reference
	}
	return r, nil
}

// GetRefund implements provider.Provider: GET /v2/payments/refunds/{id}. paymentID
// (the order id) is what the refund reports as its PaymentID: a PayPal refund names
// only its capture.
func (a *Adapter) GetRefund(ctx context.Context, paymentID, refundID string) (provider.Refund, error) {
	if refundID == "" {
		return provider.Refund{}, a.refuse("get refund", "", "empty refund id")
	}
	var out Refund
	err := a.do(ctx, provider.Request{Op: "get refund", Method: http.MethodGet, Path: "/v2/payments/refunds/" + url.PathEscape(refundID), NotFound: true}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	return NormalizeRefund(out, paymentID), nil
}

// FindRefund is unsupported: PayPal cannot search refunds by invoice id.
func (a *Adapter) FindRefund(context.Context, string, string) (provider.Refund, error) {
	return provider.Refund{}, provider.Unsupported(a.c.Name(), "find refund")
}

// NormalizeRefund maps a PayPal refund to a provider.Refund. Reference is the refund's
// invoice_id (paywarden sends its refund reference there). paymentID is the order the
// refund belongs to; when empty, the order id in supplementary_data is used.
func NormalizeRefund(r Refund, paymentID string) provider.Refund {
	out := provider.Refund{
		ID: r.ID, PaymentID: paymentID, Reference: r.InvoiceID,
		Status: MapRefundStatus(r.Status), RawStatus: r.Status,
	}
	if out.PaymentID == "" && r.SupplementaryData != nil {
		out.PaymentID = r.SupplementaryData.RelatedIDs.OrderID
	}
	if r.Amount.Value != "" {
		if n, err := ParseAmount(r.Amount.Value, r.Amount.CurrencyCode); err == nil {
			out.Amount, out.Currency = n, r.Amount.CurrencyCode
		}
	}
	if r.StatusDetails != nil {
		out.FailureCode = r.StatusDetails.Reason
	}
	return out
}

// parseTime reads PayPal's RFC 3339 times in UTC; zero when absent or
// malformed, and when outside the years 0000-9999 in UTC, which no status
// could hold (provider.StorableTime): PayPal's times are informative.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	if t, err = provider.StorableTime("time", t); err != nil {
		return time.Time{}
	}
	return t
}
