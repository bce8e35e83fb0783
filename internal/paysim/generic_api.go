package paysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
)

func (s *Sim) genericAuth(w http.ResponseWriter, r *http.Request) bool {
	if !credentialOK(bearer(r), s.opts.GenericToken) {
		s.unauthorized(w, Generic)
		return false
	}
	return true
}

func boolPtr(b bool) *bool { return &b }

func (s *Sim) genericCreate(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.writeError(w, Generic, http.StatusRequestEntityTooLarge, "too_large", err.Error(), boolPtr(false), 0)
		return
	}
	var req generic.CreateJobRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		s.writeError(w, Generic, http.StatusBadRequest, "invalid_request", "invalid JSON body", boolPtr(false), 0)
		return
	}
	if req.CorrelationID == "" || req.Amount.Value <= 0 || !validCurrency(req.Amount.Currency) {
		writeProblem(w, provider.Problem{
			Type: "https://paysim.invalid/problems/invalid_request", Title: "Invalid job request", Status: http.StatusBadRequest,
			Detail:        "correlationId, a positive amount.value and an ISO 4217 amount.currency are required",
			CorrelationID: req.CorrelationID, ProcessingStage: "validation", Retryable: boolPtr(false),
		})
		return
	}
	key := r.Header.Get(generic.HeaderIdempotencyKey)
	s.mu.Lock()
	s.countCreateLocked(Generic, key)
	replay, fp, err := s.idempotentLocked(Generic, key, body)
	if err != nil {
		s.mu.Unlock()
		writeProblem(w, provider.Problem{
			Type: "https://paysim.invalid/problems/idempotency_error", Title: "Idempotency key reused", Status: http.StatusUnprocessableEntity,
			Detail: err.Error(), CorrelationID: req.CorrelationID, ProcessingStage: "submission", Retryable: boolPtr(false),
		})
		return
	}
	if replay != nil {
		s.mu.Unlock()
		writeRaw(w, replay.status, replay.contentType, replay.body)
		return
	}
	in := newPayment{
		ref: req.CorrelationID, amount: req.Amount.Value, currency: req.Amount.Currency, description: req.Description,
		metadata: req.Metadata, returnURL: req.ReturnURL, cancelURL: req.CancelURL, base: baseURL(r),
	}
	if t, err := time.Parse(time.RFC3339, req.ExpiresAt); err == nil && t.After(s.now()) {
		in.actionExpires = t
	}
	p := s.newPaymentLocked(Generic, in)
	out, _ := json.Marshal(s.genericJob(p))
	s.rememberLocked(Generic, key, fp, http.StatusAccepted, "application/json", out)
	s.mu.Unlock()
	writeRaw(w, http.StatusAccepted, "application/json", out)
}

func (s *Sim) genericGet(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	j, ok := queryPayment(s, Generic, id, s.genericJob)
	if !ok {
		writeProblem(w, provider.Problem{
			Type: "https://paysim.invalid/problems/job_not_found", Title: "Job not found", Status: http.StatusNotFound,
			Detail: "no job " + strconv.Quote(id), JobID: id, Retryable: boolPtr(false),
		})
		return
	}
	writeJSON(w, http.StatusOK, j)
}

func (s *Sim) genericSearch(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	ref := r.URL.Query().Get("correlationId")
	writeJSON(w, http.StatusOK, generic.JobList{Items: searchPayments(s, Generic, ref, s.genericJob)})
}

// genericEvents serves GET /events?since=&cursor=&limit=, oldest first; the cursor is
// the id of the last event of the previous page.
func (s *Sim) genericEvents(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	q := r.URL.Query()
	since, err := parseSince(q.Get("since"))
	if err != nil {
		s.writeError(w, Generic, http.StatusBadRequest, "invalid_request", "since must be RFC 3339 or unix seconds", boolPtr(false), 0)
		return
	}
	raws, last, more, ok := s.eventsPage(Generic, since, q.Get("type"), q.Get("cursor"), pageLimit(r))
	if !ok {
		s.writeError(w, Generic, http.StatusBadRequest, "invalid_request", "unknown cursor", boolPtr(false), 0)
		return
	}
	out := generic.EventList{Events: raws, HasMore: more}
	if more {
		out.NextCursor = last
	}
	writeJSON(w, http.StatusOK, out)
}

func jobNotFound(id string) answer {
	return problemAnswer(provider.Problem{
		Type: "https://paysim.invalid/problems/job_not_found", Title: "Job not found", Status: http.StatusNotFound,
		Detail: "no job " + strconv.Quote(id), JobID: id, Retryable: boolPtr(false),
	})
}

// genericCreateRefund: POST /jobs/{jobId}/refunds {amount, reference, reason} with
// Idempotency-Key; 202 with the refund (processing until it settles, unless the
// payment's script settles it at once).
func (s *Sim) genericCreateRefund(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	id := r.PathValue("id")
	s.idempotentCall(w, r, Generic, generic.HeaderIdempotencyKey, func(body []byte) answer {
		var req generic.CreateRefundRequest
		if err := optionalJSON(body, &req); err != nil {
			return errorAnswer(Generic, http.StatusBadRequest, "invalid_request", "invalid JSON body", boolPtr(false), 0)
		}
		p, ok := s.payments[Generic][id]
		if !ok {
			return jobNotFound(id)
		}
		s.refreshLocked(p)
		rr := refundRequest{reference: req.Reference, reason: req.Reason}
		if req.Amount != nil {
			if req.Amount.Value <= 0 {
				return errorAnswer(Generic, http.StatusBadRequest, "invalid_request", "amount.value must be positive", boolPtr(false), 0)
			}
			rr.amount, rr.currency = req.Amount.Value, req.Amount.Currency
		}
		ref, err := s.createRefundLocked(p, rr, p.script.RefundOutcome, p.script.RefundAfter)
		if err != nil {
			typ := "refund_not_allowed"
			if errors.Is(err, errRefundTooLarge) || errors.Is(err, errFullyRefunded) {
				typ = "refund_amount_exceeded"
			}
			return problemAnswer(provider.Problem{
				Type: "https://paysim.invalid/problems/" + typ, Title: "Refund refused", Status: http.StatusUnprocessableEntity,
				Detail: err.Error(), JobID: id, JobStatus: s.genericJob(p).JobStatus, CorrelationID: p.ref, Retryable: boolPtr(false),
			})
		}
		return jsonAnswer(http.StatusAccepted, s.genericRefund(ref))
	})
}

// genericGetRefund: GET /jobs/{jobId}/refunds/{refundId}.
func (s *Sim) genericGetRefund(w http.ResponseWriter, r *http.Request) {
	if !s.genericAuth(w, r) {
		return
	}
	id, rid := r.PathValue("id"), r.PathValue("refundId")
	s.mu.Lock()
	ref, ok := s.refunds[Generic][rid]
	var a answer
	switch {
	case ok && ref.p.id == id:
		a = jsonAnswer(http.StatusOK, s.genericRefund(ref))
	default:
		a = problemAnswer(provider.Problem{
			Type: "https://paysim.invalid/problems/refund_not_found", Title: "Refund not found", Status: http.StatusNotFound,
			Detail: "no refund " + strconv.Quote(rid) + " of job " + strconv.Quote(id), JobID: id, Retryable: boolPtr(false),
		})
	}
	s.mu.Unlock()
	a.write(w)
}
