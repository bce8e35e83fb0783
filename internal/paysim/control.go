package paysim

import (
	"encoding/json"
	"errors"
	"net/http"
)

// controlRoutes registers the JSON control API under /_paysim/. It mirrors the Go
// methods so the dev environment and out-of-process tests can script paysim too.
func (s *Sim) controlRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /_paysim/counters", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Counters()) })
	m.HandleFunc("POST /_paysim/counters/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetCounters()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("GET /_paysim/faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Faults()) })
	m.HandleFunc("PUT /_paysim/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		if err := readJSON(w, r, &f); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		s.SetFaults(f)
		writeJSON(w, http.StatusOK, f)
	})
	m.HandleFunc("POST /_paysim/scripts", func(w http.ResponseWriter, r *http.Request) {
		var rule Rule
		if err := readJSON(w, r, &rule); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		if err := s.Script(rule); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusCreated, rule)
	})
	m.HandleFunc("DELETE /_paysim/scripts", func(w http.ResponseWriter, _ *http.Request) {
		s.ClearScripts()
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("PUT /_paysim/webhooks/{provider}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			URL     string   `json:"url"`
			Secrets []string `json:"secrets"`
		}
		controlCall(w, r, &body, false, http.StatusNotFound, func() error {
			secrets := make([][]byte, 0, len(body.Secrets))
			for _, sec := range body.Secrets {
				secrets = append(secrets, []byte(sec))
			}
			return s.SetWebhookTarget(r.PathValue("provider"), body.URL, secrets...)
		})
	})
	m.HandleFunc("GET /_paysim/payments/{provider}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Payments(r.PathValue("provider")))
	})
	m.HandleFunc("GET /_paysim/payments/{provider}/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.Payment(r.PathValue("provider"), r.PathValue("id"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	m.HandleFunc("POST /_paysim/payments/{provider}/{id}/outcome", func(w http.ResponseWriter, r *http.Request) {
		var sc Script
		controlCall(w, r, &sc, false, http.StatusNotFound, func() error { return s.SetOutcome(r.PathValue("provider"), r.PathValue("id"), sc) })
	})
	m.HandleFunc("POST /_paysim/payments/{provider}/{id}/refund", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Amount int64 `json:"amount"`
		}
		controlCall(w, r, &body, true, http.StatusConflict, func() error { return s.Refund(r.PathValue("provider"), r.PathValue("id"), body.Amount) })
	})
	m.HandleFunc("POST /_paysim/payments/{provider}/{id}/dispute", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		controlCall(w, r, &body, true, http.StatusNotFound, func() error { return s.Dispute(r.PathValue("provider"), r.PathValue("id"), body.Reason) })
	})
	m.HandleFunc("POST /_paysim/payments/paypal/{id}/dispute/resolve", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Outcome string `json:"outcome"`
		}
		controlCall(w, r, &body, false, http.StatusConflict, func() error { return s.PayPalResolveDispute(r.PathValue("id"), body.Outcome) })
	})
	m.HandleFunc("POST /_paysim/payments/{provider}/{id}/approve", func(w http.ResponseWriter, r *http.Request) {
		err := s.Approve(r.PathValue("provider"), r.PathValue("id"))
		switch {
		case errors.Is(err, errNotAwaitingPayer):
			controlError(w, http.StatusConflict, err)
		case err != nil:
			controlError(w, http.StatusNotFound, err)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	m.HandleFunc("POST /_paysim/payments/{provider}/{id}/reverse-approval", func(w http.ResponseWriter, r *http.Request) {
		if err := s.ReverseApproval(r.PathValue("provider"), r.PathValue("id")); err != nil {
			controlError(w, http.StatusConflict, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("POST /_paysim/refunds/{provider}/{id}/settle", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Outcome Outcome `json:"outcome"`
		}
		controlCall(w, r, &body, false, http.StatusConflict, func() error { return s.SettleRefund(r.PathValue("provider"), r.PathValue("id"), body.Outcome) })
	})
	m.HandleFunc("GET /_paysim/events/{provider}", func(w http.ResponseWriter, r *http.Request) {
		type ev struct {
			EventRecord
			Body json.RawMessage `json:"body"`
		}
		out := []ev{}
		for _, e := range s.Events(r.PathValue("provider")) {
			out = append(out, ev{e, e.Raw})
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// controlCall answers a control call: the JSON body decoded into in (400 when
// it is not JSON; an empty body is fine when optional), then do: 204, or do's
// error with code.
func controlCall(w http.ResponseWriter, r *http.Request, in any, optional bool, code int, do func() error) {
	if !optional || r.ContentLength != 0 {
		if err := readJSON(w, r, in); err != nil {
			controlError(w, http.StatusBadRequest, err)
			return
		}
	}
	if err := do(); err != nil {
		controlError(w, code, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func controlError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
