package webhookreceiver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// Issue 23: 256 unauthenticated connections to one provider's URL, each
// sending its headers and one body byte and then stalling, hold at most that
// provider's share of the slots, and only until --body-read-timeout: a
// genuine delivery to a provider of another tenant is acknowledged and
// stored while they stall; the flooded provider's own delivery is shed (503,
// Retry-After) until they are cut with 408, and then acknowledged.
func TestSlowBodiesToOneProviderDoNotShedAnother(t *testing.T) {
	const (
		slow        = webhookreceiver.DefaultMaxConcurrentRequests
		share       = webhookreceiver.DefaultMaxConcurrentRequests / webhookreceiver.DefaultProviderShareDivisor
		bodyTimeout = webhookreceiver.DefaultBodyReadTimeout
	)
	a, b := newKukoPay(t), newKukoPay(t)
	payA := a.payment(t, "order-flooded", "order-flooded", "pay_flooded", 100)
	payB := b.payment(t, "order-other", "order-other", "pay_other", 100)
	reg := prometheus.NewRegistry()
	if err := webhookreceiver.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	shedTotal := func() float64 {
		return gathered(t, reg, "paywarden_webhooks_shed_total", "provider_share") + gathered(t, reg, "paywarden_webhooks_shed_total", "concurrency")
	}
	// The default pool, share and body deadline; ReadTimeout is long, so
	// only the body deadline can free the stalled requests' slots.
	base := startServer(t, webhookreceiver.Options{ReadTimeout: 2 * time.Minute, RetryAfter: 3 * time.Second})
	shedBefore, shareBefore := shedTotal(), gathered(t, reg, "paywarden_webhooks_shed_total", "provider_share")

	start := time.Now()
	conns := holdConns(t, base, "/webhooks/"+a.ns+"/"+a.name, slow, 1000, "{")
	// Every one of them is past its first body byte: holding a slot or shed.
	fixture.Eventually(t, fixture.Timeout, "every slow request to hold a slot or be shed", func() (bool, string) {
		held := gathered(t, reg, "paywarden_webhook_requests_in_flight", "")
		shed := shedTotal() - shedBefore
		return held+shed == slow, fmt.Sprintf("%v slow requests hold a slot and %v were shed, want %d together", held, shed, slow)
	})

	wantCode(t, b.deliverTo(t, base, b.event("evt_other_tenant", "payment.succeeded", "succeeded", payB)), http.StatusOK)
	if got := fixture.GetPayment(t, env.Client, payB); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("other tenant's payment %s, want its delivery applied", got.Status.Phase)
	}
	if e := fixture.WaitEventResult(t, env.Client, b.ns, b.name, "evt_other_tenant", "", fixture.Timeout); e == nil {
		t.Fatal("other tenant's event not stored")
	}
	// Acknowledged while the slow requests still held their slots, not
	// after they were cut.
	if held := gathered(t, reg, "paywarden_webhook_requests_in_flight", ""); held < share {
		t.Fatalf("%v requests in flight after the other tenant's delivery, want the %d slow ones of the flooded provider's share still held", held, share)
	}

	// The flooded provider's own delivery waits for its share.
	r := a.deliverTo(t, base, a.event("evt_flooded", "payment.succeeded", "succeeded", payA))
	wantCode(t, r, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") != "3" {
		t.Errorf("shed delivery has Retry-After %q, want 3", r.Header.Get("Retry-After"))
	}

	// Beyond the share: 503 at once. Within it: 408 at the body deadline,
	// and the connection is closed.
	codes := map[int]int{}
	for i, c := range conns {
		code, closed, err := answerOn(c, fixture.Timeout)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		if code == http.StatusRequestTimeout && !closed {
			t.Errorf("slow connection %d answered 408 and kept open, want it closed", i)
		}
		codes[code]++
	}
	cut := time.Since(start)
	if codes[http.StatusServiceUnavailable] != slow-share || codes[http.StatusRequestTimeout] != share {
		t.Fatalf("slow requests answered %v, want %d × 503 and %d × 408", codes, slow-share, share)
	}
	if d := gathered(t, reg, "paywarden_webhooks_shed_total", "provider_share") - shareBefore; d != slow-share+1 {
		t.Errorf("shed{provider_share} moved by %v, want %d (the slow requests beyond the share and the provider's own delivery)", d, slow-share+1)
	}
	t.Logf("%d slow bodies: %d shed at once, %d cut with 408 after %s (body deadline %s)", slow, slow-share, share, cut.Round(time.Millisecond), bodyTimeout)
	if cut > bodyTimeout+15*time.Second {
		t.Errorf("slow bodies were cut after %s, want about the body deadline %s", cut, bodyTimeout)
	}
	fixture.Eventually(t, fixture.Timeout, "no request in flight", func() (bool, string) {
		n := gathered(t, reg, "paywarden_webhook_requests_in_flight", "")
		return n == 0, fmt.Sprintf("%v requests in flight after the slow ones were cut, want 0", n)
	})

	// The provider redelivers and is acknowledged.
	wantCode(t, a.deliverTo(t, base, a.event("evt_flooded", "payment.succeeded", "succeeded", payA)), http.StatusOK)
	if got := fixture.GetPayment(t, env.Client, payA); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("flooded provider's payment %s, want its redelivery applied", got.Status.Phase)
	}
}

// answerOn reads the answer the receiver sent on c (a connection of
// holdConns) within timeout; closed reports, for a 408, that the receiver
// closed the connection after it (a shed 503 leaves the unread body to
// ReadTimeout, holding no slot).
func answerOn(c net.Conn, timeout time.Duration) (code int, closed bool, err error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false, fmt.Errorf("no answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusRequestTimeout {
		_, err := br.ReadByte()
		var op *net.OpError
		closed = errors.Is(err, io.EOF) || (errors.As(err, &op) && !op.Timeout())
	}
	return resp.StatusCode, closed, nil
}
