package paysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

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
	p := s.newPaymentLocked(PayPal, ref, amount, pu.Amount.CurrencyCode, pu.Description, nil)
	out, _ := json.Marshal(s.paypalOrder(p))
	s.rememberLocked(PayPal, key, fp, http.StatusCreated, "application/json", out)
	s.mu.Unlock()
	writeRaw(w, http.StatusCreated, "application/json", out)
}

func (s *Sim) paypalGet(w http.ResponseWriter, r *http.Request) {
	if !s.paypalAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	p, ok := s.payments[PayPal][id]
	var o paypal.Order
	if ok {
		s.counters.QueriesByPayment[id]++
		o = s.paypalOrder(p)
	}
	s.mu.Unlock()
	if !ok {
		s.writeError(w, PayPal, http.StatusNotFound, "RESOURCE_NOT_FOUND", "The specified resource does not exist.", nil, 0)
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
