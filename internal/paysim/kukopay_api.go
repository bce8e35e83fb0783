package paysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

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
		p = s.newPaymentLocked(KukoPay, req.OutTradeNo, req.Amount, req.Currency, req.Description, req.Metadata)
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
	s.mu.Lock()
	p, ok := s.payments[KukoPay][id]
	var obj kukopay.PaymentObject
	if ok {
		s.counters.QueriesByPayment[id]++
		obj = s.kukopayObject(p)
	}
	s.mu.Unlock()
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
	out := kukopay.List[kukopay.PaymentObject]{Object: "list", Data: []kukopay.PaymentObject{}}
	s.mu.Lock()
	s.counters.Searches++
	for _, p := range s.payments[KukoPay] {
		if ref == "" || p.ref == ref {
			out.Data = append(out.Data, s.kukopayObject(p))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
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
	s.mu.Lock()
	s.counters.EventListCalls++
	page, more, ok := s.eventsPageLocked(KukoPay, since, q.Get("type"), q.Get("starting_after"), pageLimit(r))
	out := kukopay.List[json.RawMessage]{Object: "list", Data: []json.RawMessage{}, HasMore: more}
	for _, e := range page {
		out.Data = append(out.Data, e.Raw)
	}
	s.mu.Unlock()
	if !ok {
		s.writeError(w, KukoPay, http.StatusBadRequest, "invalid_request", "unknown starting_after event", nil, 0)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
