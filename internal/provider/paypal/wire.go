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

// CreateOrderRequest is the body of POST /v2/checkout/orders.
type CreateOrderRequest struct {
	Intent        string                `json:"intent"` // "CAPTURE"
	PurchaseUnits []PurchaseUnitRequest `json:"purchase_units"`
}

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

// Payments holds the captures and refunds of a purchase unit.
type Payments struct {
	Captures []Capture `json:"captures,omitempty"`
	Refunds  []Refund  `json:"refunds,omitempty"`
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
	SellerPayableBreakdown *SellerPayableBreakdown `json:"seller_payable_breakdown,omitempty"`
	SupplementaryData      *SupplementaryData      `json:"supplementary_data,omitempty"`
	CreateTime             string                  `json:"create_time,omitempty"`
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
	OrderID   string `json:"order_id,omitempty"`
	CaptureID string `json:"capture_id,omitempty"`
}

// Link is a HATEOAS link.
type Link struct {
	Href   string `json:"href"`
	Rel    string `json:"rel"`
	Method string `json:"method,omitempty"`
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

// VerifyRequest is the body of POST /v1/notifications/verify-webhook-signature.
// WebhookEvent must be the event exactly as received.
type VerifyRequest struct {
	AuthAlgo         string          `json:"auth_algo"`
	CertURL          string          `json:"cert_url"`
	TransmissionID   string          `json:"transmission_id"`
	TransmissionSig  string          `json:"transmission_sig"`
	TransmissionTime string          `json:"transmission_time"`
	WebhookID        string          `json:"webhook_id"`
	WebhookEvent     json.RawMessage `json:"webhook_event"`
}

// VerifyResponse is the answer: VerificationStatus is "SUCCESS" or "FAILURE".
type VerifyResponse struct {
	VerificationStatus string `json:"verification_status"`
}

// ErrorBody is PayPal's error answer.
type ErrorBody struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	DebugID string `json:"debug_id,omitempty"`
}
