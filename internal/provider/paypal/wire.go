package paypal

import "encoding/json"

// TokenResponse is the answer of POST /v1/oauth2/token.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"` // seconds
	AppID       string `json:"app_id,omitempty"`
	Scope       string `json:"scope,omitempty"`
}

// Money is PayPal's amount: a decimal string in the currency's major unit.
type Money struct {
	CurrencyCode string `json:"currency_code"`
	Value        string `json:"value"`
}

// Order intents.
const (
	IntentCapture   = "CAPTURE"   // the merchant captures the approved order (one call)
	IntentAuthorize = "AUTHORIZE" // the merchant authorizes the approved order, captures later
)

// CreateOrderRequest is the body of POST /v2/checkout/orders.
type CreateOrderRequest struct {
	Intent        string                `json:"intent"` // IntentCapture or IntentAuthorize
	PurchaseUnits []PurchaseUnitRequest `json:"purchase_units"`
	// PaymentSource with an experience context makes PayPal answer
	// PAYER_ACTION_REQUIRED with a "payer-action" link, and send the payer back to
	// return_url / cancel_url.
	PaymentSource *PaymentSource `json:"payment_source,omitempty"`
}

// PaymentSource is the payment_source of a create request.
type PaymentSource struct {
	PayPal *WalletSource `json:"paypal,omitempty"`
}

// WalletSource is payment_source.paypal.
type WalletSource struct {
	ExperienceContext *ExperienceContext `json:"experience_context,omitempty"`
}

// ExperienceContext customizes the payer's approval flow.
type ExperienceContext struct {
	ReturnURL string `json:"return_url,omitempty"`
	CancelURL string `json:"cancel_url,omitempty"`
	// UserAction "PAY_NOW" labels the button "Pay Now": the payer knows the money
	// is taken on return (intent CAPTURE); the default "CONTINUE" suits orders
	// whose amount may still change.
	UserAction string `json:"user_action,omitempty"`
}

// Link relations paywarden reads.
const (
	RelPayerAction = "payer-action" // where the payer approves (orders created with a payment_source)
	RelApprove     = "approve"      // the same for orders created without one
	RelUp          = "up"           // the parent resource (a capture's order or authorization)
	RelNext        = "next"         // the next page of a list
)

// PurchaseUnitRequest is one purchase unit of a create request.
type PurchaseUnitRequest struct {
	ReferenceID string `json:"reference_id,omitempty"`
	InvoiceID   string `json:"invoice_id,omitempty"`
	CustomID    string `json:"custom_id,omitempty"`
	Description string `json:"description,omitempty"`
	Amount      Money  `json:"amount"`
}

// Order is a PayPal order (GET /v2/checkout/orders/{id}, and CHECKOUT.ORDER.* resources).
type Order struct {
	ID            string         `json:"id"`
	Status        string         `json:"status"`
	Intent        string         `json:"intent,omitempty"`
	PurchaseUnits []PurchaseUnit `json:"purchase_units,omitempty"`
	CreateTime    string         `json:"create_time,omitempty"`
	UpdateTime    string         `json:"update_time,omitempty"`
	Links         []Link         `json:"links,omitempty"`
}

// PurchaseUnit is one purchase unit of an order.
type PurchaseUnit struct {
	ReferenceID string    `json:"reference_id,omitempty"`
	InvoiceID   string    `json:"invoice_id,omitempty"`
	CustomID    string    `json:"custom_id,omitempty"`
	Description string    `json:"description,omitempty"`
	Amount      Money     `json:"amount"`
	Payments    *Payments `json:"payments,omitempty"`
}

// Payments holds the authorizations, captures and refunds of a purchase unit.
type Payments struct {
	Authorizations []Authorization `json:"authorizations,omitempty"`
	Captures       []Capture       `json:"captures,omitempty"`
	Refunds        []Refund        `json:"refunds,omitempty"`
}

// Authorization is an authorized payment of an order with intent AUTHORIZE (also the
// resource of PAYMENT.AUTHORIZATION.* events).
type Authorization struct {
	ID            string         `json:"id"`
	Status        string         `json:"status"` // CREATED, PENDING, CAPTURED, PARTIALLY_CAPTURED, VOIDED, EXPIRED, DENIED
	StatusDetails *StatusDetails `json:"status_details,omitempty"`
	Amount        Money          `json:"amount"`
	InvoiceID     string         `json:"invoice_id,omitempty"`
	CustomID      string         `json:"custom_id,omitempty"`
	// ExpirationTime is when the authorization can no longer be captured (RFC 3339).
	ExpirationTime    string             `json:"expiration_time,omitempty"`
	SupplementaryData *SupplementaryData `json:"supplementary_data,omitempty"`
	CreateTime        string             `json:"create_time,omitempty"`
	UpdateTime        string             `json:"update_time,omitempty"`
	Links             []Link             `json:"links,omitempty"` // rel "up" is the order
}

// CaptureAuthorizationRequest is the body of
// POST /v2/payments/authorizations/{id}/capture. Without Amount the whole authorized
// amount is captured; FinalCapture releases whatever is left.
type CaptureAuthorizationRequest struct {
	Amount       *Money `json:"amount,omitempty"`
	FinalCapture bool   `json:"final_capture"`
}

// RefundCaptureRequest is the body of POST /v2/payments/captures/{id}/refund. Without
// Amount the rest of the capture is refunded.
type RefundCaptureRequest struct {
	Amount *Money `json:"amount,omitempty"`
	// InvoiceID carries paywarden's reference of the refund, CustomID the payment's
	// merchant reference (so a refund webhook still finds its payment).
	InvoiceID   string `json:"invoice_id,omitempty"`
	CustomID    string `json:"custom_id,omitempty"`
	NoteToPayer string `json:"note_to_payer,omitempty"`
}

// Capture is a captured payment (also the resource of PAYMENT.CAPTURE.* events).
type Capture struct {
	ID                string             `json:"id"`
	Status            string             `json:"status"`
	StatusDetails     *StatusDetails     `json:"status_details,omitempty"`
	Amount            Money              `json:"amount"`
	InvoiceID         string             `json:"invoice_id,omitempty"`
	CustomID          string             `json:"custom_id,omitempty"`
	FinalCapture      bool               `json:"final_capture,omitempty"`
	SupplementaryData *SupplementaryData `json:"supplementary_data,omitempty"`
	CreateTime        string             `json:"create_time,omitempty"`
	UpdateTime        string             `json:"update_time,omitempty"`
	Links             []Link             `json:"links,omitempty"` // rel "up" is the order
}

// Refund is a refund of a capture (also the resource of PAYMENT.CAPTURE.REFUNDED).
type Refund struct {
	ID                     string                  `json:"id"`
	Status                 string                  `json:"status"`
	StatusDetails          *StatusDetails          `json:"status_details,omitempty"`
	Amount                 Money                   `json:"amount"`
	InvoiceID              string                  `json:"invoice_id,omitempty"`
	CustomID               string                  `json:"custom_id,omitempty"`
	NoteToPayer            string                  `json:"note_to_payer,omitempty"`
	SellerPayableBreakdown *SellerPayableBreakdown `json:"seller_payable_breakdown,omitempty"`
	SupplementaryData      *SupplementaryData      `json:"supplementary_data,omitempty"`
	CreateTime             string                  `json:"create_time,omitempty"`
	UpdateTime             string                  `json:"update_time,omitempty"`
	Links                  []Link                  `json:"links,omitempty"` // rel "up" is the capture
}

// SellerPayableBreakdown carries the cumulative refunded amount of the capture.
type SellerPayableBreakdown struct {
	TotalRefundedAmount *Money `json:"total_refunded_amount,omitempty"`
}

// StatusDetails explains a non-COMPLETED capture or refund.
type StatusDetails struct {
	Reason string `json:"reason,omitempty"`
}

// SupplementaryData links a capture or refund to its order.
type SupplementaryData struct {
	RelatedIDs RelatedIDs `json:"related_ids"`
}

// RelatedIDs is the inside of SupplementaryData.
type RelatedIDs struct {
	OrderID         string `json:"order_id,omitempty"`
	AuthorizationID string `json:"authorization_id,omitempty"`
	CaptureID       string `json:"capture_id,omitempty"`
}

// Link is a HATEOAS link.
type Link struct {
	Href   string `json:"href"`
	Rel    string `json:"rel"`
	Method string `json:"method,omitempty"`
}

// ApprovalReversal is the resource of CHECKOUT.PAYMENT-APPROVAL.REVERSED: the
// order whose approval PayPal reversed because it was not captured in time.
type ApprovalReversal struct {
	OrderID       string         `json:"order_id"`
	PurchaseUnits []PurchaseUnit `json:"purchase_units,omitempty"`
}

// Dispute is the resource of CUSTOMER.DISPUTE.* events.
type Dispute struct {
	DisputeID             string                `json:"dispute_id"`
	Reason                string                `json:"reason,omitempty"`
	Status                string                `json:"status,omitempty"`
	DisputeAmount         Money                 `json:"dispute_amount"`
	DisputedTransactions  []DisputedTransaction `json:"disputed_transactions,omitempty"`
	CreateTime            string                `json:"create_time,omitempty"`
	DisputeLifeCycleStage string                `json:"dispute_life_cycle_stage,omitempty"`
	DisputeOutcome        *DisputeOutcome       `json:"dispute_outcome,omitempty"`
}

// DisputeOutcome is how a resolved dispute ended (Customer Disputes API v1,
// definition dispute_outcome).
type DisputeOutcome struct {
	OutcomeCode    string `json:"outcome_code"`
	AmountRefunded *Money `json:"amount_refunded,omitempty"`
}

// The dispute_outcome.outcome_code values PayPal lists (Customer Disputes
// API v1, definition dispute_outcome); the reference defines none of them.
const (
	OutcomeBuyerFavour  = "RESOLVED_BUYER_FAVOUR"
	OutcomeSellerFavour = "RESOLVED_SELLER_FAVOUR"
	OutcomeWithPayout   = "RESOLVED_WITH_PAYOUT"
	OutcomeCanceled     = "CANCELED_BY_BUYER"
	OutcomeAccepted     = "ACCEPTED"
	OutcomeDenied       = "DENIED"
	OutcomeNone         = "NONE"
)

// DisputeOutcomeCodes lists every documented outcome_code.
func DisputeOutcomeCodes() []string {
	return []string{OutcomeBuyerFavour, OutcomeSellerFavour, OutcomeWithPayout, OutcomeCanceled, OutcomeAccepted, OutcomeDenied, OutcomeNone}
}

// DisputedTransaction names the seller transaction a dispute is about.
type DisputedTransaction struct {
	SellerTransactionID string `json:"seller_transaction_id,omitempty"`
	InvoiceNumber       string `json:"invoice_number,omitempty"`
	Custom              string `json:"custom,omitempty"`
}

// WebhookEvent is the envelope of every PayPal webhook.
type WebhookEvent struct {
	ID           string          `json:"id"`
	EventVersion string          `json:"event_version,omitempty"`
	CreateTime   string          `json:"create_time"`
	ResourceType string          `json:"resource_type,omitempty"`
	EventType    string          `json:"event_type"`
	Summary      string          `json:"summary,omitempty"`
	Resource     json.RawMessage `json:"resource"`
}

// EventList is the answer of GET /v1/notifications/webhooks-events (Webhooks
// Management API v1, "List event notifications"): webhook event objects, how
// many, and the link to the next page (rel "next") when there is one.
type EventList struct {
	Events []json.RawMessage `json:"events"`
	Count  int               `json:"count"`
	Links  []Link            `json:"links,omitempty"`
}

// VerifyRequest is the body of POST /v1/notifications/verify-webhook-signature.
// WebhookEvent must be the event exactly as received, so VerifyRequestBody
// splices it in after the other members, which it encodes without it.
type VerifyRequest struct {
	AuthAlgo         string          `json:"auth_algo"`
	CertURL          string          `json:"cert_url"`
	TransmissionID   string          `json:"transmission_id"`
	TransmissionSig  string          `json:"transmission_sig"`
	TransmissionTime string          `json:"transmission_time"`
	WebhookID        string          `json:"webhook_id"`
	WebhookEvent     json.RawMessage `json:"webhook_event,omitempty"`
}

// VerifyResponse is the answer: VerificationStatus is "SUCCESS" or "FAILURE".
type VerifyResponse struct {
	VerificationStatus string `json:"verification_status"`
}

// ErrorBody is PayPal's error answer. Name is the class (UNPROCESSABLE_ENTITY); what
// went wrong is in Details[].Issue (ORDER_ALREADY_CAPTURED, ...).
type ErrorBody struct {
	Name    string        `json:"name"`
	Message string        `json:"message"`
	DebugID string        `json:"debug_id,omitempty"`
	Details []ErrorDetail `json:"details,omitempty"`
}

// ErrorDetail is one entry of ErrorBody.Details.
type ErrorDetail struct {
	Field       string `json:"field,omitempty"`
	Value       string `json:"value,omitempty"`
	Location    string `json:"location,omitempty"`
	Issue       string `json:"issue"`
	Description string `json:"description,omitempty"`
}

// The error issues paywarden acts on (ErrorDetail.Issue).
const (
	IssueOrderNotApproved             = "ORDER_NOT_APPROVED"
	IssueOrderAlreadyCaptured         = "ORDER_ALREADY_CAPTURED"
	IssueOrderAlreadyAuthorized       = "ORDER_ALREADY_AUTHORIZED"
	IssueActionDoesNotMatchIntent     = "ACTION_DOES_NOT_MATCH_INTENT"
	IssueAuthorizationAlreadyCaptured = "AUTHORIZATION_ALREADY_CAPTURED"
	IssueAuthorizationVoided          = "AUTHORIZATION_VOIDED"
	IssueAuthorizationExpired         = "AUTHORIZATION_EXPIRED"
	IssuePreviouslyVoided             = "PREVIOUSLY_VOIDED"
	IssuePreviouslyCaptured           = "PREVIOUSLY_CAPTURED"
	IssueMaxCaptureAmountExceeded     = "MAX_CAPTURE_AMOUNT_EXCEEDED"
	IssueCaptureFullyRefunded         = "CAPTURE_FULLY_REFUNDED"
	IssueRefundAmountExceeded         = "REFUND_AMOUNT_EXCEEDED"
	IssueCurrencyMismatch             = "CURRENCY_MISMATCH"
	// IssueInstrumentDeclined: the payer's funding source failed at the
	// capture or authorization of an approved order; the payer must approve
	// again with another one (PayPal developer docs, "Handle funding failures").
	IssueInstrumentDeclined = "INSTRUMENT_DECLINED"
)
