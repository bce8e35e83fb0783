package localnet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/localnet"
)

// A probe whose process has exited ends the wait at once with its error;
// any other failing probe is tried until the timeout.
func TestPollEndsAtAFinalAnswer(t *testing.T) {
	exited := errors.New("process exited: exit status 1")
	calls := 0
	start := time.Now()
	err := localnet.Poll(context.Background(), time.Minute, func(context.Context) error {
		calls++
		return localnet.Final(exited)
	})
	if !errors.Is(err, exited) || calls != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("Poll = %v after %d probes and %s; want the exit at once", err, calls, time.Since(start))
	}

	calls = 0
	err = localnet.Poll(context.Background(), 700*time.Millisecond, func(context.Context) error {
		calls++
		return errors.New("connection refused")
	})
	if err == nil || calls < 2 {
		t.Fatalf("Poll = %v after %d probes; want the timeout after several", err, calls)
	}
}
