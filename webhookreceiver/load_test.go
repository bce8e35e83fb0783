package webhookreceiver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// startServer runs a receiver of its own, with opts, on the suite's cache and
// API server, and returns its base URL. It is stopped when the test ends.
func startServer(t *testing.T, opts webhookreceiver.Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = ln
	if opts.Client == nil {
		opts.Client = rcv.Client
	}
	opts.Reader, opts.APIReader = rcv.Cache, env.Client
	if opts.BundleNamespace == "" {
		opts.BundleNamespace = fixture.BundleNamespace // rcv's
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 2 * time.Second
	}
	srv, err := webhookreceiver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// holdConns opens n connections that each send a webhook request's headers,
// declaring a body of declared bytes, plus the first sent bytes of it, and
// then stall. They are closed when the test ends.
func holdConns(t *testing.T, base, path string, n int, declared int64, sent string) []net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, addr, declared, sent)
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// unanswered fails the test if any of conns got an answer: they must still be
// waiting for their bodies.
func unanswered(t *testing.T, conns []net.Conn) {
	t.Helper()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		_, err := c.Read(b[:])
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("held connection %d was answered or closed (%v); it should still be waiting for its body", i, err)
		}
		_ = c.SetReadDeadline(time.Time{})
	}
}

func heapAfterGC() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// deliverTo sends a correctly signed event of k to another receiver.
func (k kukoPay) deliverTo(t *testing.T, base string, ev fixture.KukoPayEvent) fixture.Response {
	t.Helper()
	body := ev.Body(t)
	return fixture.Send(t, "POST", base+"/webhooks/"+k.ns+"/"+k.name, body, fixture.KukoPayHeader(body, time.Now(), k.secret))
}

// deliverInBackground sends a correctly signed event of k to the receiver at
// base from another goroutine; the channel gets the answer's status code, 0
// when no answer came.
func (k kukoPay) deliverInBackground(t *testing.T, base string, ev fixture.KukoPayEvent) <-chan int {
	t.Helper()
	body := ev.Body(t)
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/webhooks/"+k.ns+"/"+k.name, bytes.NewReader(body))
		req.Header = fixture.KukoPayHeader(body, time.Now(), k.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	return answered
}

// 1000 connections that declare a 16 MiB body (the largest maxBodyBytes)
// and send none cost the receiver under heapBound of heap and goroutine
// stacks together (they would cost 16 GiB if a declared length sized a
// buffer), and a genuine
// delivery is acknowledged while they are held: they do not count against
// --max-concurrent-requests before their first body byte.
func TestHeaderOnlyConnectionsCostLittleAndDoNotStarveDeliveries(t *testing.T) {
	const (
		conns     = 1000
		heapBound = 64 << 20
		declared  = 16 << 20
	)
	k := newKukoPay(t, func(p *fixture.Provider) { p.MaxBodyBytes = declared })
	// ReadTimeout is long so the connections are held for the whole test.
	base := startServer(t, webhookreceiver.Options{ReadTimeout: 2 * time.Minute})
	p := k.payment(t, "order-load", "order-load", "pay_load", 100)
	// Warm up whatever the first request builds (the adapter, pools).
	wantCode(t, k.deliverTo(t, base, k.event("evt_load_warmup", "dispute.created", "succeeded", p)), http.StatusOK)

	before := heapAfterGC()
	goroutines := runtime.NumGoroutine()
	held := holdConns(t, base, "/webhooks/"+k.ns+"/"+k.name, conns, declared, "")
	// One server goroutine per connection, each past its headers and
	// waiting for the body.
	fixture.Eventually(t, fixture.Timeout, "every connection to be served", func() (bool, string) {
		n := runtime.NumGoroutine() - goroutines
		return n >= conns, fmt.Sprintf("%d of %d connections being served", n, conns)
	})

	r := k.deliverTo(t, base, k.event("evt_load", "payment.succeeded", "succeeded", p))
	wantCode(t, r, http.StatusOK)
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("payment %s, want the delivery applied while %d connections are held", got.Status.Phase, conns)
	}
	unanswered(t, held)

	after := heapAfterGC()
	heapInuse := int64(after.HeapInuse) - int64(before.HeapInuse)
	heapAlloc := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	stacks := int64(after.StackInuse) - int64(before.StackInuse)
	t.Logf("%d header-only connections declaring %d MiB: heap in use +%.1f MiB, heap allocated +%.1f MiB, goroutine stacks +%.1f MiB",
		conns, declared>>20, mib(heapInuse), mib(heapAlloc), mib(stacks))
	// Goroutine stacks are not heap, but they are memory the connections
	// cost: the bound covers both.
	if heapInuse+stacks > heapBound || heapAlloc > heapBound {
		t.Errorf("heap grew by %.1f MiB in use (+%.1f MiB stacks) / %.1f MiB allocated, want under %d MiB", mib(heapInuse), mib(stacks), mib(heapAlloc), heapBound>>20)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// holdFirst holds the first WebhookEvent create until released; later ones pass.
type holdFirst struct {
	client.Client
	once             sync.Once
	entered, release chan struct{}
}

func (h *holdFirst) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha1.WebhookEvent); ok {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.entered)
			<-h.release
		}
	}
	return h.Client.Create(ctx, obj, opts...)
}

// With --max-concurrent-requests=1 and one request in flight, the next is
// answered 503 with Retry-After at once and its body is not read; requests
// that only sent headers never held the slot.
func TestConcurrencyBoundShedsWithoutReadingTheBody(t *testing.T) {
	k := newKukoPay(t)
	reg := prometheus.NewRegistry()
	if err := webhookreceiver.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	hold := &holdFirst{Client: rcv.Client, entered: make(chan struct{}), release: make(chan struct{})}
	// ReadTimeout is long: the stalled connections must outlast the test,
	// and only shedding can answer the request beyond the bound promptly.
	base := startServer(t, webhookreceiver.Options{Client: hold, MaxConcurrentRequests: 1, RetryAfter: 4 * time.Second, ReadTimeout: 2 * time.Minute})
	path := "/webhooks/" + k.ns + "/" + k.name
	stalled := holdConns(t, base, path, 5, 512, "")

	answered := k.deliverInBackground(t, base, fixture.KukoPayEvent{ID: "evt_slot", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_slot", MerchantRef: "order-slot", Amount: 1, Currency: "USD"})
	select {
	case <-hold.entered:
	case <-time.After(fixture.Timeout):
		t.Fatal("the first delivery never reached the store; the stalled connections must not hold the only slot")
	}

	shedBefore := gathered(t, reg, "paywarden_webhooks_shed_total", "concurrency")
	// The second request declares a body it never finishes sending: if the
	// receiver read it, the answer would wait for the read timeout.
	wantShedAtOnce(t, holdConns(t, base, path, 1, 4096, `{"id":"evt_over"`)[0], "4")
	if d := gathered(t, reg, "paywarden_webhooks_shed_total", "concurrency") - shedBefore; d != 1 {
		t.Errorf("shed{concurrency} moved by %v, want 1", d)
	}
	if got := gathered(t, reg, "paywarden_webhook_requests_in_flight", ""); got != 1 {
		t.Errorf("in-flight gauge %v while one request holds the slot, want 1", got)
	}

	close(hold.release)
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("request holding the slot got %d, want 200", code)
	}
	// The slot is free again.
	ev := fixture.KukoPayEvent{ID: "evt_after_slot", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_slot2", MerchantRef: "order-slot2", Amount: 1, Currency: "USD"}
	wantCode(t, k.deliverTo(t, base, ev), http.StatusOK)
	unanswered(t, stalled)
}

// A body trickled too slowly holds its slot only until its deadline, the
// earlier of ReadTimeout from the request's start and BodyReadTimeout from
// its first byte: it is answered 408 and the slot is free for the next
// delivery. The body deadline never lengthens ReadTimeout.
func TestSlowBodyIsCutAtItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		readTimeout, bodyReadTimeout time.Duration
		cut                          time.Duration // when the body is cut
	}{
		{"the body read timeout comes first", 2 * time.Minute, 2 * time.Second, 2 * time.Second},
		{"the read timeout comes first", 2 * time.Second, time.Minute, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKukoPay(t)
			reg := prometheus.NewRegistry()
			if err := webhookreceiver.RegisterMetrics(reg); err != nil {
				t.Fatal(err)
			}
			base := startServer(t, webhookreceiver.Options{MaxConcurrentRequests: 1, ReadTimeout: tc.readTimeout, BodyReadTimeout: tc.bodyReadTimeout})
			start := time.Now()
			slow := holdConns(t, base, "/webhooks/"+k.ns+"/"+k.name, 1, 1000, `{"id":"evt_slow",`)[0]

			// Past its first body byte, the slow request holds the only slot.
			fixture.Eventually(t, tc.cut, "the slow request to hold the only slot", func() (bool, string) {
				n := gathered(t, reg, "paywarden_webhook_requests_in_flight", "")
				return n == 1, fmt.Sprintf("%v requests in flight, want the slow one", n)
			})

			// Without a deadline the request would wait for its body for ever.
			_ = slow.SetReadDeadline(time.Now().Add(fixture.Timeout))
			resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
			if err != nil {
				t.Fatalf("slow body not answered: %v", err)
			}
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("slow body answered %d, want 408", resp.StatusCode)
			}
			t.Logf("slow body answered 408 after %s (ReadTimeout %s, BodyReadTimeout %s)", took.Round(time.Millisecond), tc.readTimeout, tc.bodyReadTimeout)
			if took < tc.cut || took > tc.cut+10*time.Second {
				t.Errorf("slow body cut after %s, want at %s", took, tc.cut)
			}
			if n := gathered(t, reg, "paywarden_webhook_requests_in_flight", ""); n != 0 {
				t.Errorf("%v requests in flight after the slow one was cut, want 0", n)
			}
			ev := fixture.KukoPayEvent{ID: "evt_after_slow", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_after_slow", MerchantRef: "order-after-slow", Amount: 1, Currency: "USD"}
			wantCode(t, k.deliverTo(t, base, ev), http.StatusOK)
		})
	}
}

// Headers over MaxHeaderBytes are refused by the HTTP server before any
// handler runs.
func TestOversizedHeadersAreRefused(t *testing.T) {
	k := newKukoPay(t)
	base := startServer(t, webhookreceiver.Options{MaxHeaderBytes: 4 << 10})
	body := []byte(`{}`)
	h := fixture.KukoPayHeader(body, time.Now(), k.secret)
	h.Set("X-Padding", strings.Repeat("p", 16<<10))
	r := fixture.Send(t, "POST", base+"/webhooks/"+k.ns+"/"+k.name, body, h)
	wantCode(t, r, http.StatusRequestHeaderFieldsTooLarge)
	wantNoEvents(t, k.ns)
}

// gathered reads one sample of a metric family from reg; label is the value
// of its only label, or "" for an unlabelled metric.
func gathered(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The body bytes in flight are bounded apart from the requests: a request
// reserves what its body can take (its Content-Length) at its first body
// byte, and one that would pass --max-body-bytes-in-flight is answered 503
// at once without its body being read. Bodies to one provider's URL, up to
// a 16 MiB maxBodyBytes each, would otherwise hold the receiver's memory
// limit with a few dozen requests. A delivery that fits is served.
func TestBodyBytesInFlightShedWithoutReadingTheBody(t *testing.T) {
	k := newKukoPay(t)
	reg := prometheus.NewRegistry()
	if err := webhookreceiver.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	// Two stalled bodies of 1000 bytes reserve 2 × 1512 of 4096: a third
	// does not fit, a delivery of a few hundred bytes does.
	base := startServer(t, webhookreceiver.Options{MaxConcurrentRequests: 256, MaxConcurrentRequestsPerProvider: 256,
		MaxBodyBytesInFlight: 4096, RetryAfter: 4 * time.Second, ReadTimeout: 2 * time.Minute, BodyReadTimeout: 2 * time.Minute})
	path := "/webhooks/" + k.ns + "/" + k.name
	inFlightBefore := gathered(t, reg, "paywarden_webhook_requests_in_flight", "")
	stalled := holdConns(t, base, path, 2, 1000, "{")
	fixture.Eventually(t, fixture.Timeout, "the stalled bodies to hold their bytes", func() bool {
		return gathered(t, reg, "paywarden_webhook_requests_in_flight", "")-inFlightBefore >= 2
	})

	shedBefore := gathered(t, reg, "paywarden_webhooks_shed_total", "body_bytes")
	wantShedAtOnce(t, holdConns(t, base, path, 1, 1000, "{")[0], "4")
	if d := gathered(t, reg, "paywarden_webhooks_shed_total", "body_bytes") - shedBefore; d != 1 {
		t.Errorf("shed{body_bytes} moved by %v, want 1", d)
	}
	ev := fixture.KukoPayEvent{ID: "evt_fits", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_fits", MerchantRef: "order-fits", Amount: 1, Currency: "USD"}
	wantCode(t, k.deliverTo(t, base, ev), http.StatusOK)
	unanswered(t, stalled)
}

// wantShedAtOnce reads the answer to a request on conn whose body was never
// finished: it must come at once (the body is not read), 503 with
// Retry-After retryAfter and Connection: close.
func wantShedAtOnce(t *testing.T, conn net.Conn, retryAfter string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(fixture.Timeout))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no prompt answer beyond the bound: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != retryAfter {
		t.Fatalf("beyond the bound: %d with Retry-After %q, want 503 with Retry-After %s", resp.StatusCode, resp.Header.Get("Retry-After"), retryAfter)
	}
	if !resp.Close {
		t.Errorf("shed answer keeps the connection, want Connection: close (the rest of the body is not read)")
	}
}
