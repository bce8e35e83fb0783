package paysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

func (s *Sim) kukopayAuth(w http.ResponseWriter, r *http.Request) bool {
	if !credentialOK(r.Header.Get(kukopay.HeaderAPIKey), s.opts.KukoPayAPIKey) {
		s.unauthorized(w, KukoPay)
		return false
	}
	return true
}

// kukopayCreate: the Idempotency-Key replays the first answer for the window, and
// out_trade_no is itself idempotent (same content returns the existing payment).
func (s *Sim) kukopayCreate(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.writeError(w, KukoPay, http.StatusRequestEntityTooLarge, "invalid_request", err.Error(), nil, 0)
		return
	}
	var req kukopay.CreatePaymentRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "invalid JSON body", nil, 0)
		return
	}
	if req.OutTradeNo == "" || req.Amount <= 0 || !validCurrency(req.Currency) {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "out_trade_no, a positive amount and an ISO 4217 currency are required", nil, 0)
		return
	}
	if req.CaptureMethod != "" && req.CaptureMethod != kukopay.CaptureAutomatic && req.CaptureMethod != kukopay.CaptureManual {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "capture_method must be automatic or manual", nil, 0)
		return
	}
	var actionExpires time.Time
	if req.ExpiresAt != 0 {
		now := s.now()
		actionExpires = time.Unix(req.ExpiresAt, 0)
		if !actionExpires.After(now) {
			s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "expires_at must be in the future", nil, 0)
			return
		}
		if limit := now.Add(kukopay.MaxCheckoutLifetime); actionExpires.After(limit) {
			actionExpires = limit
		}
	}
	key := r.Header.Get(kukopay.HeaderIdempotencyKey)
	s.mu.Lock()
	s.countCreateLocked(KukoPay, key)
	replay, fp, err := s.idempotentLocked(KukoPay, key, body)
	if err != nil {
		s.mu.Unlock()
		s.writeError(w, KukoPay, http.StatusUnprocessableEntity, "idempotency_error", err.Error(), nil, 0)
		return
	}
	if replay != nil {
		s.mu.Unlock()
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, replay.status, replay.contentType, replay.body)
		return
	}
	var existing *payment
	for _, p := range s.payments[KukoPay] {
		if p.ref == req.OutTradeNo {
			existing = p
			break
		}
	}
	if existing != nil && (existing.amount != req.Amount || existing.currency != req.Currency) {
		s.mu.Unlock()
		s.writeError(w, KukoPay, http.StatusConflict, "duplicate_out_trade_no", "out_trade_no already used with a different amount or currency", nil, 0)
		return
	}
	p := existing
	if p == nil {
		p = s.newPaymentLocked(KukoPay, newPayment{
			ref: req.OutTradeNo, amount: req.Amount, currency: req.Currency, description: req.Description, metadata: req.Metadata,
			manual: req.CaptureMethod == kukopay.CaptureManual, returnURL: req.ReturnURL, cancelURL: req.CancelURL,
			customer: req.Customer, method: req.PaymentMethod, actionExpires: actionExpires, base: baseURL(r),
		})
	}
	out, _ := json.Marshal(s.kukopayObject(p))
	s.rememberLocked(KukoPay, key, fp, http.StatusOK, "application/json", out)
	s.mu.Unlock()
	writeRaw(w, http.StatusOK, "application/json", out)
}

func (s *Sim) kukopayGet(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	obj, ok := queryPayment(s, KukoPay, id, s.kukopayObject)
	if !ok {
		s.writeError(w, KukoPay, http.StatusNotFound, "resource_missing", "no such payment: "+id, nil, 0)
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

func (s *Sim) kukopaySearch(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	ref := r.URL.Query().Get("out_trade_no")
	writeJSON(w, http.StatusOK, kukopay.List[kukopay.PaymentObject]{Object: "list", Data: searchPayments(s, KukoPay, ref, s.kukopayObject)})
}

// kukopayEvents serves GET /v1/events?type=&created[gte]=&starting_after=&limit=,
// oldest first so starting_after pages forward.
func (s *Sim) kukopayEvents(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	q := r.URL.Query()
	since, err := parseSince(q.Get("created[gte]"))
	if err != nil {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "created[gte] must be RFC 3339 or unix seconds", nil, 0)
		return
	}
	raws, _, more, ok := s.eventsPage(KukoPay, since, q.Get("type"), q.Get("starting_after"), pageLimit(r))
	if !ok {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "unknown starting_after event", nil, 0)
		return
	}
	writeJSON(w, http.StatusOK, kukopay.List[json.RawMessage]{Object: "list", Data: raws, HasMore: more})
}

// kukopayError is KukoPay's error answer.
func kukopayError(status int, code, msg string) answer {
	return jsonAnswer(status, kukopay.ErrorBody{Error: kukopay.ErrorDetail{Code: code, Message: msg}})
}

// kukopayAction serves a call on the payment {id} (capture, cancel):
// authenticated and idempotent, its optional JSON body read into a new R and
// the payment looked up and brought up to date before act answers (under the
// lock, as idempotentCall runs it).
func kukopayAction[R any](s *Sim, w http.ResponseWriter, r *http.Request, act func(id string, p *payment, req *R) answer) {
	if !s.kukopayAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.idempotentCall(w, r, KukoPay, kukopay.HeaderIdempotencyKey, func(body []byte) answer {
		var req R
		if err := optionalJSON(body, &req); err != nil {
			return kukopayError(http.StatusBadRequest, "invalid_request", "invalid JSON body")
		}
		p, ok := s.payments[KukoPay][id]
		if !ok {
			return kukopayError(http.StatusNotFound, kukopay.ErrorCodeResourceMissing, "no such payment: "+id)
		}
		s.refreshLocked(p)
		return act(id, p, &req)
	})
}

// kukopayCapture: POST /v1/payments/{id}/capture {amount_to_capture}, for a payment in
// requires_capture; 0 captures amount_capturable.
func (s *Sim) kukopayCapture(w http.ResponseWriter, r *http.Request) {
	kukopayAction(s, w, r, func(id string, p *payment, req *kukopay.CaptureRequest) answer {
		switch p.state {
		case stAuthorized:
		case stSucceeded, stProcessing:
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeAlreadyCaptured, "payment "+id+" has already been captured")
		default:
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeNotCapturable, "payment "+id+" is "+s.kukopayObject(p).Status+", not requires_capture")
		}
		amount := p.auth.amount
		if req.AmountToCapture != 0 {
			if req.AmountToCapture < 0 || req.AmountToCapture > p.auth.amount {
				return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeAmountTooLarge, "amount_to_capture must be between 1 and amount_capturable")
			}
			amount = req.AmountToCapture
		}
		s.captureLocked(p, amount, true)
		return jsonAnswer(http.StatusOK, s.kukopayObject(p))
	})
}

// kukopayCancel: POST /v1/payments/{id}/cancel {cancellation_reason}, for a payment
// that took no money (pending, requires_action, requires_capture).
func (s *Sim) kukopayCancel(w http.ResponseWriter, r *http.Request) {
	kukopayAction(s, w, r, func(id string, p *payment, req *kukopay.CancelRequest) answer {
		switch p.state {
		case stPending, stAuthorized:
		case stCanceled:
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeAlreadyCanceled, "payment "+id+" is already canceled")
		default:
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeNotCancelable, "payment "+id+" is "+s.kukopayObject(p).Status+" and cannot be canceled")
		}
		reason := req.CancellationReason
		if reason == "" {
			reason = "requested_by_merchant"
		}
		s.cancelLocked(p, reason)
		return jsonAnswer(http.StatusOK, s.kukopayObject(p))
	})
}

// kukopayCreateRefund: POST /v1/refunds {payment, amount, reason, metadata}.
func (s *Sim) kukopayCreateRefund(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	s.idempotentCall(w, r, KukoPay, kukopay.HeaderIdempotencyKey, func(body []byte) answer {
		var req kukopay.CreateRefundRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Payment == "" || req.Amount < 0 {
			return kukopayError(http.StatusBadRequest, "invalid_request", "a JSON body with payment and a non-negative amount is required")
		}
		p, ok := s.payments[KukoPay][req.Payment]
		if !ok {
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeResourceMissing, "no such payment: "+req.Payment)
		}
		s.refreshLocked(p)
		ref, err := s.createRefundLocked(p, refundRequest{
			amount: req.Amount, reference: req.Metadata[kukopay.MetadataReference], reason: req.Reason,
		}, p.script.RefundOutcome, p.script.RefundAfter)
		switch {
		case errors.Is(err, errFullyRefunded), errors.Is(err, errRefundTooLarge):
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeAmountTooLarge, err.Error())
		case err != nil:
			return kukopayError(http.StatusBadRequest, kukopay.ErrorCodeNotRefundable, "payment "+p.id+" is "+s.kukopayObject(p).Status+": "+err.Error())
		}
		return jsonAnswer(http.StatusOK, s.kukopayRefund(ref))
	})
}

func (s *Sim) kukopayGetRefund(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	ref, ok := s.refunds[KukoPay][id]
	var a answer
	if ok {
		a = jsonAnswer(http.StatusOK, s.kukopayRefund(ref))
	} else {
		a = kukopayError(http.StatusNotFound, kukopay.ErrorCodeResourceMissing, "no such refund: "+id)
	}
	s.mu.Unlock()
	a.write(w)
}

// kukopayListRefunds: GET /v1/refunds?payment=&reference=, oldest first.
func (s *Sim) kukopayListRefunds(w http.ResponseWriter, r *http.Request) {
	if !s.kukopayAuth(w, r) {
		return
	}
	q := r.URL.Query()
	payment, reference := q.Get("payment"), q.Get("reference")
	out := kukopay.List[kukopay.RefundObject]{Object: "list", Data: []kukopay.RefundObject{}}
	s.mu.Lock()
	s.counters.Searches++
	var list []*refund
	if p, ok := s.payments[KukoPay][payment]; ok {
		list = p.refunds
	} else if payment == "" {
		for _, p := range s.payments[KukoPay] {
			list = append(list, p.refunds...)
		}
	}
	for _, ref := range list {
		if reference == "" || ref.reference == reference {
			out.Data = append(out.Data, s.kukopayRefund(ref))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
