package payment

import (
	"hash/fnv"
	"strconv"
	"time"
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
