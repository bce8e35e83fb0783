package paysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/paywarden/paywarden/internal/provider/paypal"
)

func (s *Sim) paypalToken(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || !credentialOK(id, s.opts.PayPalClientID) || !credentialOK(secret, s.opts.PayPalClientSecret) {
		s.mu.Lock()
		s.counters.Unauthorized++
		s.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "Client Authentication failed"})
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type", "error_description": "grant_type must be client_credentials"})
		return
	}
	s.mu.Lock()
	tok := s.newID("A21AA", 40, alphaNum)
	s.tokens[tok] = s.now().Add(s.opts.PayPalTokenTTL)
	s.counters.TokensIssued++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, paypal.TokenResponse{
		AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(s.opts.PayPalTokenTTL.Seconds()),
		AppID: "APP-PAYSIM", Scope: "https://uri.paypal.com/services/payments/payment",
	})
}

func (s *Sim) paypalAuth(w http.ResponseWriter, r *http.Request) bool {
	tok := bearer(r)
	s.mu.Lock()
	exp, ok := s.tokens[tok]
	valid := ok && s.now().Before(exp)
	if !valid {
		s.counters.Unauthorized++
	}
	s.mu.Unlock()
	if !valid {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token", "error_description": "Token signature verification failed"})
	}
	return valid
}

func (s *Sim) paypalCreate(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.writeError(w, PayPal, http.StatusRequestEntityTooLarge, "INVALID_REQUEST", err.Error(), nil, 0)
		return
	}
	var req paypal.CreateOrderRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil || len(req.PurchaseUnits) == 0 {
		s.writeError(w, PayPal, http.StatusBadRequest, "INVALID_REQUEST", "a JSON body with purchase_units is required", nil, 0)
		return
	}
	if req.Intent != paypal.IntentCapture && req.Intent != paypal.IntentAuthorize {
		paypalIssue(http.StatusBadRequest, "INVALID_PARAMETER_VALUE", "intent must be CAPTURE or AUTHORIZE").write(w)
		return
	}
	pu := req.PurchaseUnits[0]
	amount, err := paypal.ParseAmount(pu.Amount.Value, pu.Amount.CurrencyCode)
	if err != nil || amount <= 0 || !validCurrency(pu.Amount.CurrencyCode) {
		s.writeError(w, PayPal, http.StatusUnprocessableEntity, "UNPROCESSABLE_ENTITY", "invalid purchase_units[0].amount", nil, 0)
		return
	}
	key := r.Header.Get(paypal.HeaderRequestID)
	s.mu.Lock()
	s.countCreateLocked(PayPal, key)
	replay, fp, err := s.idempotentLocked(PayPal, key, body)
	if err != nil {
		s.mu.Unlock()
		s.writeError(w, PayPal, http.StatusUnprocessableEntity, "UNPROCESSABLE_ENTITY", err.Error(), nil, 0)
		return
	}
	if replay != nil {
		s.mu.Unlock()
		writeRaw(w, replay.status, replay.contentType, replay.body)
		return
	}
	ref := pu.InvoiceID
	if ref == "" {
		ref = pu.CustomID
	}
	in := newPayment{
		ref: ref, amount: amount, currency: pu.Amount.CurrencyCode, description: pu.Description,
		manual: req.Intent == paypal.IntentAuthorize, base: baseURL(r),
	}
	if ps := req.PaymentSource; ps != nil && ps.PayPal != nil {
		in.checkout = true
		if ec := ps.PayPal.ExperienceContext; ec != nil {
			in.returnURL, in.cancelURL = ec.ReturnURL, ec.CancelURL
		}
	}
	p := s.newPaymentLocked(PayPal, in)
	out, _ := json.Marshal(s.paypalOrder(p))
	s.rememberRouteLocked(PayPal, "/v2/checkout/orders", key, fp, http.StatusCreated, "application/json", out)
	s.mu.Unlock()
	writeRaw(w, http.StatusCreated, "application/json", out)
}

func (s *Sim) paypalGet(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	o, ok := queryPayment(s, PayPal, id, s.paypalOrder)
	if !ok {
		paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "Specified resource ID does not exist. Please check the resource ID and try again.").write(w)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// paypalVerify checks a transmission against the configured PayPal webhook secrets and
// webhook id, as PayPal's endpoint does against its certificate.
func (s *Sim) paypalVerify(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	var req paypal.VerifyRequest
	if err := readJSON(w, r, &req); err != nil {
		s.writeError(w, PayPal, http.StatusBadRequest, "VALIDATION_ERROR", err.Error(), nil, 0)
		return
	}
	if req.TransmissionID == "" || req.TransmissionSig == "" || req.TransmissionTime == "" || req.WebhookID == "" || req.AuthAlgo == "" || req.CertURL == "" || len(req.WebhookEvent) == 0 {
		s.writeError(w, PayPal, http.StatusBadRequest, "VALIDATION_ERROR", "Invalid request - see details", nil, 0)
		return
	}
	s.mu.Lock()
	s.counters.VerifyCalls++
	secrets := s.targets[PayPal].secrets
	s.mu.Unlock()
	status := "FAILURE"
	if req.WebhookID == s.opts.PayPalWebhookID && req.AuthAlgo == paypal.SimAuthAlgo && paypal.CheckTransmission(req, secrets) {
		status = paypal.VerificationSuccess
	}
	writeJSON(w, http.StatusOK, paypal.VerifyResponse{VerificationStatus: status})
}

// baseURL is the scheme and host a request reached paysim through, for links the
// payer opens.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// paypalIssue is PayPal's answer to a refused business rule: details[0].issue says
// what (ORDER_ALREADY_CAPTURED, ...).
func paypalIssue(status int, issue, description string) answer {
	name, msg := "UNPROCESSABLE_ENTITY", "The requested action could not be performed, semantically incorrect, or failed business validation."
	switch status {
	case http.StatusBadRequest:
		name, msg = "INVALID_REQUEST", "Request is not well-formed, syntactically incorrect, or violates schema."
	case http.StatusNotFound:
		name, msg = "RESOURCE_NOT_FOUND", "The specified resource does not exist."
	}
	return jsonAnswer(status, paypal.ErrorBody{
		Name: name, Message: msg, DebugID: "paysim",
		Details: []paypal.ErrorDetail{{Issue: issue, Description: description}},
	})
}

// paypalPayment finds the order of id (an order, authorization or capture id per
// index) and applies the deadlines that passed; s.mu must be held. An order that
// expired uncompleted is not found (Options.PayPalOrderLifetime).
func (s *Sim) paypalPaymentLocked(index map[string]*payment, id string) (*payment, bool) {
	p, ok := index[id]
	if ok {
		s.refreshLocked(p)
		ok = !p.gone
	}
	return p, ok
}

// paypalOrderCall serves a call on an APPROVED order {id}, authenticated and
// idempotent: capture (manual false) or authorize (manual true). PayPal refuses
// it for an unknown order, an order of the other intent, one the payer has
// not approved and one whose funding source is declined; act answers for the
// order otherwise.
func (s *Sim) paypalOrderCall(w http.ResponseWriter, r *http.Request, manual bool, act func(p *payment) answer) {
	if !s.paypalAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.idempotentCall(w, r, PayPal, paypal.HeaderRequestID, func([]byte) answer {
		p, ok := s.paypalPaymentLocked(s.payments[PayPal], id)
		switch {
		case !ok:
			return paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "no order "+id)
		case p.manual && !manual:
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueActionDoesNotMatchIntent, "the order's intent is AUTHORIZE")
		case !p.manual && manual:
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueActionDoesNotMatchIntent, "the order's intent is CAPTURE")
		case p.state == stPending:
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueOrderNotApproved, "the payer has not approved the order")
		case p.state == stApproved && s.declineFundingLocked(p):
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueInstrumentDeclined, "the payer's funding source was declined; the payer must approve the order again with another one")
		}
		return act(p)
	})
}

// paypalCaptureOrder: POST /v2/checkout/orders/{id}/capture, for an APPROVED order
// with intent CAPTURE. A second capture (another PayPal-Request-Id) is refused with
// ORDER_ALREADY_CAPTURED; the same id replays the first answer.
func (s *Sim) paypalCaptureOrder(w http.ResponseWriter, r *http.Request) {
	s.paypalOrderCall(w, r, false, func(p *payment) answer {
		switch {
		case p.state == stApproved:
			s.captureLocked(p, p.amount, true)
			return jsonAnswer(http.StatusCreated, s.paypalOrder(p))
		case p.captureID != "":
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueOrderAlreadyCaptured, "the order was already captured")
		default:
			return paypalIssue(http.StatusUnprocessableEntity, "ORDER_NOT_CAPTURABLE", "the order is "+string(p.state))
		}
	})
}

// paypalAuthorizeOrder: POST /v2/checkout/orders/{id}/authorize, for an APPROVED order
// with intent AUTHORIZE.
func (s *Sim) paypalAuthorizeOrder(w http.ResponseWriter, r *http.Request) {
	s.paypalOrderCall(w, r, true, func(p *payment) answer {
		switch {
		case p.state == stApproved:
			s.authorizeLocked(p)
			return jsonAnswer(http.StatusCreated, s.paypalOrder(p))
		case p.auth != nil:
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueOrderAlreadyAuthorized, "the order was already authorized")
		default:
			return paypalIssue(http.StatusUnprocessableEntity, "ORDER_NOT_AUTHORIZABLE", "the order is "+string(p.state))
		}
	})
}

func (s *Sim) paypalGetAuthorization(w http.ResponseWriter, r *http.Request) {
	paypalGetOf(s, w, r, s.byAuth, "authorization", s.paypalAuthorization)
}

// paypalGetOf answers a GET of the PayPal object of kind what with the id in
// the path, which index maps to its order, as render shows it.
func paypalGetOf[T any](s *Sim, w http.ResponseWriter, r *http.Request, index map[string]*payment, what string, render func(*payment) T) {
	if !s.paypalAuth(w, r) {
		return
	}
	s.mu.Lock()
	p, ok := s.paypalPaymentLocked(index, r.PathValue("id"))
	var a answer
	if ok {
		a = jsonAnswer(http.StatusOK, render(p))
	} else {
		a = paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "no "+what+" "+r.PathValue("id"))
	}
	s.mu.Unlock()
	a.write(w)
}

// authorizationRefusal is PayPal's answer to a capture or void of an authorization
// that is no longer CREATED.
func authorizationRefusal(a *authorization, void bool) answer {
	switch a.status {
	case "CAPTURED", "PARTIALLY_CAPTURED":
		if void {
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssuePreviouslyCaptured, "Authorization has been previously captured and hence cannot be voided.")
		}
		return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueAuthorizationAlreadyCaptured, "Authorization has been previously captured.")
	case "VOIDED":
		if void {
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssuePreviouslyVoided, "Authorization has been previously voided and hence cannot be voided again.")
		}
		return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueAuthorizationVoided, "A voided authorization cannot be captured or reauthorized.")
	default:
		return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueAuthorizationExpired, "The authorization has expired.")
	}
}

// paypalAction serves a call on the PayPal object {id} of kind what (an
// authorization or a capture), authenticated and idempotent: its optional JSON
// body is read into a new R and its order found through index before act
// answers; a body that is not JSON or an unknown object is refused.
func paypalAction[R any](s *Sim, w http.ResponseWriter, r *http.Request, index map[string]*payment, what string, act func(p *payment, req *R) answer) {
	if !s.paypalAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.idempotentCall(w, r, PayPal, paypal.HeaderRequestID, func(body []byte) answer {
		var req R
		if err := optionalJSON(body, &req); err != nil {
			return paypalIssue(http.StatusBadRequest, "MALFORMED_REQUEST_JSON", err.Error())
		}
		p, ok := s.paypalPaymentLocked(index, id)
		if !ok {
			return paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "no "+what+" "+id)
		}
		return act(p, &req)
	})
}

// paypalCaptureAuthorization: POST /v2/payments/authorizations/{id}/capture
// {amount, final_capture}. Without amount the whole authorization is captured; one
// capture per authorization (a partial capture with final_capture false leaves it
// PARTIALLY_CAPTURED, and paysim refuses further captures).
func (s *Sim) paypalCaptureAuthorization(w http.ResponseWriter, r *http.Request) {
	paypalAction(s, w, r, s.byAuth, "authorization", func(p *payment, req *paypal.CaptureAuthorizationRequest) answer {
		a := p.auth
		if a.status != "CREATED" {
			return authorizationRefusal(a, false)
		}
		amount := a.amount
		if req.Amount != nil {
			if req.Amount.CurrencyCode != p.currency {
				return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueCurrencyMismatch, "the capture currency must be the authorization's")
			}
			n, err := paypal.ParseAmount(req.Amount.Value, req.Amount.CurrencyCode)
			if err != nil || n <= 0 {
				return paypalIssue(http.StatusBadRequest, "INVALID_PARAMETER_VALUE", "invalid amount")
			}
			if n > a.amount {
				return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueMaxCaptureAmountExceeded, "the capture amount exceeds the authorized amount")
			}
			amount = n
		}
		s.captureLocked(p, amount, req.FinalCapture)
		return jsonAnswer(http.StatusCreated, s.paypalCapture(p))
	})
}

// paypalVoidAuthorization: POST /v2/payments/authorizations/{id}/void; 204, or 200
// with the authorization for Prefer: return=representation.
func (s *Sim) paypalVoidAuthorization(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	representation := strings.Contains(r.Header.Get("Prefer"), "return=representation")
	s.idempotentCall(w, r, PayPal, paypal.HeaderRequestID, func([]byte) answer {
		p, ok := s.paypalPaymentLocked(s.byAuth, id)
		if !ok {
			return paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "no authorization "+id)
		}
		if p.auth.status != "CREATED" {
			return authorizationRefusal(p.auth, true)
		}
		s.cancelLocked(p, "voided")
		if representation {
			return jsonAnswer(http.StatusOK, s.paypalAuthorization(p))
		}
		return answer{status: http.StatusNoContent}
	})
}

func (s *Sim) paypalGetCapture(w http.ResponseWriter, r *http.Request) {
	paypalGetOf(s, w, r, s.byCap, "capture", s.paypalCapture)
}

// paypalRefundCapture: POST /v2/payments/captures/{id}/refund {amount, invoice_id,
// custom_id, note_to_payer}; 201 with the refund (COMPLETED, or PENDING/FAILED as the
// payment's script says).
func (s *Sim) paypalRefundCapture(w http.ResponseWriter, r *http.Request) {
	paypalAction(s, w, r, s.byCap, "capture", func(p *payment, req *paypal.RefundCaptureRequest) answer {
		rr := refundRequest{reference: req.InvoiceID, reason: req.NoteToPayer, customID: req.CustomID}
		if req.Amount != nil {
			n, err := paypal.ParseAmount(req.Amount.Value, req.Amount.CurrencyCode)
			if err != nil || n <= 0 {
				return paypalIssue(http.StatusBadRequest, "INVALID_PARAMETER_VALUE", "invalid amount")
			}
			rr.amount, rr.currency = n, req.Amount.CurrencyCode
		}
		ref, err := s.createRefundLocked(p, rr, p.script.RefundOutcome, p.script.RefundAfter)
		switch {
		case errors.Is(err, errFullyRefunded):
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueCaptureFullyRefunded, "The capture has already been fully refunded.")
		case errors.Is(err, errRefundTooLarge):
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueRefundAmountExceeded, "The refund amount must be less than or equal to the capture amount that has not yet been refunded.")
		case errors.Is(err, errCurrencyMismatch):
			return paypalIssue(http.StatusUnprocessableEntity, paypal.IssueCurrencyMismatch, err.Error())
		case err != nil:
			return paypalIssue(http.StatusUnprocessableEntity, "REFUND_NOT_ALLOWED", err.Error())
		}
		return jsonAnswer(http.StatusCreated, s.paypalRefund(ref))
	})
}

func (s *Sim) paypalGetRefund(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	s.mu.Lock()
	ref, ok := s.refunds[PayPal][r.PathValue("id")]
	var a answer
	if ok {
		a = jsonAnswer(http.StatusOK, s.paypalRefund(ref))
	} else {
		a = paypalIssue(http.StatusNotFound, "INVALID_RESOURCE_ID", "no refund "+r.PathValue("id"))
	}
	s.mu.Unlock()
	a.write(w)
}
