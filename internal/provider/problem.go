package provider

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Problem is an RFC 9457 problem details object with the asynchronous-job extension
// members (jobId, jobStatus, correlationId, processingStage, retryable, retryAfter) that
// the generic provider and paysim use. Other extension members are kept in Extensions.
type Problem struct {
	Type     string `json:"type,omitempty"`
	Title    string `json:"title,omitempty"`
	Status   int    `json:"status,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`

	JobID           string `json:"jobId,omitempty"`
	JobStatus       string `json:"jobStatus,omitempty"`
	CorrelationID   string `json:"correlationId,omitempty"`
	ProcessingStage string `json:"processingStage,omitempty"`
	// Retryable is a pointer because absent means "decide from the HTTP status",
	// which is different from an explicit false.
	Retryable *bool `json:"retryable,omitempty"`
	// RetryAfter is kept raw: senders use delay-seconds as a number or a string, an
	// RFC 3339 timestamp or an HTTP-date. Use RetryAfterDelay to interpret it.
	RetryAfter json.RawMessage `json:"retryAfter,omitempty"`

	// Extensions holds every other member, undecoded.
	Extensions map[string]json.RawMessage `json:"-"`
}

// problemMembers are the members decoded into fields; the rest go to Extensions.
var problemMembers = map[string]bool{
	"type": true, "title": true, "status": true, "detail": true, "instance": true,
	"jobId": true, "jobStatus": true, "correlationId": true, "processingStage": true,
	"retryable": true, "retryAfter": true,
}

// UnmarshalJSON decodes the known members leniently: a member of the wrong JSON type is
// dropped (RFC 9457 §3.1 says to ignore it) instead of failing the whole document,
// because an odd problem body must not hide the HTTP status behind a decode error.
func (p *Problem) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*p = Problem{}
	str := func(k string) string {
		var s string
		if v, ok := raw[k]; ok {
			_ = json.Unmarshal(v, &s)
		}
		return s
	}
	p.Type, p.Title, p.Detail, p.Instance = str("type"), str("title"), str("detail"), str("instance")
	p.JobID, p.JobStatus, p.CorrelationID, p.ProcessingStage = str("jobId"), str("jobStatus"), str("correlationId"), str("processingStage")
	if v, ok := raw["status"]; ok {
		var n int
		if json.Unmarshal(v, &n) == nil {
			p.Status = n
		}
	}
	if v, ok := raw["retryable"]; ok {
		var r bool
		if json.Unmarshal(v, &r) == nil {
			p.Retryable = &r
		}
	}
	if v, ok := raw["retryAfter"]; ok && string(v) != "null" {
		p.RetryAfter = append(json.RawMessage(nil), v...)
	}
	for k, v := range raw {
		if problemMembers[k] {
			continue
		}
		if p.Extensions == nil {
			p.Extensions = map[string]json.RawMessage{}
		}
		p.Extensions[k] = v
	}
	return nil
}

// MarshalJSON writes the known members and the extensions in one object.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem // drops the methods, so no recursion
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Extensions) == 0 {
		return b, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range p.Extensions {
		if !problemMembers[k] {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// RetryAfterDelay interprets the retryAfter member relative to now.
func (p *Problem) RetryAfterDelay(now time.Time) (time.Duration, bool) {
	if p == nil || len(p.RetryAfter) == 0 {
		return 0, false
	}
	var n float64
	if err := json.Unmarshal(p.RetryAfter, &n); err == nil {
		return secondsDelay(n)
	}
	var s string
	if err := json.Unmarshal(p.RetryAfter, &s); err != nil {
		return 0, false
	}
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return min(d, maxRetryAfterSeconds*time.Second), true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return secondsDelay(f)
	}
	return ParseRetryAfter(s, now)
}

// DecodeProblem decodes an application/problem+json body; ok is false when the body is
// not a JSON object.
func DecodeProblem(body []byte) (*Problem, bool) {
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, false
	}
	return &p, true
}

// secondsDelay converts a seconds count, rejecting negatives and NaN and capping before
// the float-to-int conversion (which is undefined for huge values).
func secondsDelay(f float64) (time.Duration, bool) {
	if !(f >= 0) {
		return 0, false
	}
	if f > maxRetryAfterSeconds {
		f = maxRetryAfterSeconds
	}
	return time.Duration(f * float64(time.Second)), true
}
