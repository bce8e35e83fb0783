package payment

import (
	"hash/fnv"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Delay is the wait before status query number attempt+1 (attempt counts the
// queries already made), or false when the schedule is exhausted. The jitter
// (± jitterPercent) is derived from seed and attempt rather than a random
// source: payments created together still spread out, yet the same payment
// always computes the same schedule, so the function stays pure and a
// restarted manager agrees with the one before it.
func Delay(schedule []time.Duration, jitterPercent int32, attempt int32, seed string) (time.Duration, bool) {
	if attempt < 0 || int(attempt) >= len(schedule) {
		return 0, false
	}
	d := schedule[attempt]
	if jitterPercent <= 0 || d <= 0 {
		return d, true
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(int(attempt))))
	// frac is uniform in [-1, 1).
	frac := float64(h.Sum64()%20001)/10000 - 1
	return d + time.Duration(float64(d)*float64(jitterPercent)/100*frac), true
}

// QueryOutcome is what one status query (or create) call produced, for the
// schedule bookkeeping.
type QueryOutcome struct {
	// Err is the call's error text; empty on success.
	Err string
	// RetryAfter is the provider's hint to wait at least this long.
	RetryAfter time.Duration
}

// ScheduleNext records a status query made at now and moves the schedule on:
// attempts+1, the error (if any), and the next due time, honouring the
// provider's Retry-After. It reports false when the schedule is exhausted; the
// caller then feeds a RetriesExhausted observation to Apply.
func ScheduleNext(st *v1alpha1.PaymentStatus, schedule []time.Duration, jitterPercent int32, seed string, out QueryOutcome, now time.Time) bool {
	q := &st.Query
	t := metav1.NewMicroTime(now)
	q.LastTime = &t
	q.Attempts++
	if out.Err != "" {
		q.LastError = out.Err
		q.ConsecutiveErrors++
	} else {
		q.LastError = ""
		q.ConsecutiveErrors = 0
	}
	d, ok := Delay(schedule, jitterPercent, q.Attempts, seed)
	if !ok {
		q.NextTime = nil
		return false
	}
	if out.RetryAfter > d {
		d = out.RetryAfter
	}
	next := metav1.NewMicroTime(now.Add(d))
	q.NextTime = &next
	return true
}

// StartSchedule (re)starts the query schedule: no attempts yet, the first
// query due after delay. Used once a payment exists at the provider and by the
// requery action.
func StartSchedule(st *v1alpha1.PaymentStatus, delay time.Duration, now time.Time) {
	next := metav1.NewMicroTime(now.Add(delay))
	st.Query.Attempts = 0
	st.Query.ConsecutiveErrors = 0
	st.Query.LastError = ""
	st.Query.NextTime = &next
}

// RecordCreateError keeps the error of a create that may be retried, and when
// to retry it; the payment stays Pending (a timeout is never a failure).
func RecordCreateError(st *v1alpha1.PaymentStatus, schedule []time.Duration, out QueryOutcome, now time.Time) {
	q := &st.Query
	q.LastError = out.Err
	q.ConsecutiveErrors++
	// Creates retry on the first steps of the schedule, capped at its last step:
	// the create must eventually go through or be resolved, never given up.
	i := int(q.ConsecutiveErrors) - 1
	if i >= len(schedule) {
		i = len(schedule) - 1
	}
	d := time.Second
	if i >= 0 && len(schedule) > 0 {
		d = schedule[i]
	}
	if out.RetryAfter > d {
		d = out.RetryAfter
	}
	next := metav1.NewMicroTime(now.Add(d))
	q.NextTime = &next
}

// Requery applies the operator's requery action: the schedule restarts with a
// query due now, and the action is recorded in history. It takes an Unknown
// payment back into automatic handling; the phase itself is left to the next
// observation, through Apply.
func Requery(st *v1alpha1.PaymentStatus, value string, now time.Time) {
	StartSchedule(st, 0, now)
	st.Actions.Requery = value
	phase := st.Phase
	if phase == "" {
		phase = v1alpha1.PhasePending
	}
	m := machine{st: *st, obs: Observation{Source: v1alpha1.SourceManual}, now: now}
	m.appendHistory(phase, phase, "Requery: restart the status-query schedule")
	*st = m.st
}
