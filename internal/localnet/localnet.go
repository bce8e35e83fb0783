// Package localnet holds the loopback helpers of the programs that run
// paywarden's processes on one machine (make dev, the benchmark, the soak):
// free ports and waiting for an HTTP endpoint to answer.
package localnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// FreePorts returns n free loopback ports.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitHTTP polls url until it answers 2xx, for at most timeout.
func WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	err := Poll(ctx, timeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			return errors.New(resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// Poll calls probe every 200ms until it returns nil, for at most timeout;
// the error says why the last probe failed. A probe that returns an error
// made by Final (the process it waits for has exited) ends the wait at once.
func Poll(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if last = probe(ctx); last == nil {
			return nil
		}
		if errors.As(last, new(finalError)) {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %s: %w", timeout, last)
}

// Final marks err as an answer that waiting longer cannot change (the
// process that was to answer has exited): Poll returns it at once.
func Final(err error) error { return finalError{err} }

type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }
