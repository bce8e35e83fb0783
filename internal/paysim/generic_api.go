package paysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

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
	p := s.newPaymentLocked(Generic, req.CorrelationID, req.Amount.Value, req.Amount.Currency, req.Description, req.Metadata)
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
	s.mu.Lock()
	p, ok := s.payments[Generic][id]
	var j generic.Job
	if ok {
		s.counters.QueriesByPayment[id]++
		j = s.genericJob(p)
	}
	s.mu.Unlock()
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
	out := generic.JobList{Items: []generic.Job{}}
	s.mu.Lock()
	s.counters.Searches++
	for _, p := range s.payments[Generic] {
		if ref == "" || p.ref == ref {
			out.Items = append(out.Items, s.genericJob(p))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
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
	s.mu.Lock()
	s.counters.EventListCalls++
	page, more, ok := s.eventsPageLocked(Generic, since, q.Get("type"), q.Get("cursor"), pageLimit(r))
	out := generic.EventList{Events: []json.RawMessage{}, HasMore: more}
	for _, e := range page {
		out.Events = append(out.Events, e.Raw)
	}
	if more && len(page) > 0 {
		out.NextCursor = page[len(page)-1].ID
	}
	s.mu.Unlock()
	if !ok {
		s.writeError(w, Generic, http.StatusBadRequest, "invalid_request", "unknown cursor", boolPtr(false), 0)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
