package webhookreceiver_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
)

// Ack latency of the real receiver over loopback HTTP against the envtest
// API server: verify, store the WebhookEvent, apply to the Payment, record
// the result. Run with
//
//	go test ./webhookreceiver -run '^$' -bench BenchmarkReceiver -benchtime 400x
//
// Each benchmark reports p50/p99 in milliseconds and requests per second,
// sequentially and with 8 concurrent senders.

var benchClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64},
}

// BenchmarkReceiverNewEvent measures events never seen before, each moving
// its own Payment from Pending to Succeeded (three API writes per request).
func BenchmarkReceiverNewEvent(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("senders=%d", workers), func(b *testing.B) {
			k := benchProvider(b)
			bodies := make([][]byte, b.N)
			var last *v1alpha1.Payment
			for i := range bodies {
				ref := fmt.Sprintf("bench-%d", i)
				last = fixture.CreatePayment(b, env.Client, fixture.Payment{Namespace: k.ns, Name: ref, Provider: k.name, MerchantReference: ref, ProviderPaymentID: "pay_" + ref, Amount: 1000, Currency: "USD"})
				ev := fixture.KukoPayEvent{ID: "evt_" + ref, Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_" + ref, MerchantRef: ref, Amount: 1000, Currency: "USD"}
				bodies[i] = ev.Body(b)
			}
			// The receiver must see every payment before the clock starts;
			// payments are cached in creation order.
			fixture.WaitCached(b, rcv.Cache, last)
			lat := measure(b, k, workers, func(i int) []byte { return bodies[i] })
			report(b, lat)
		})
	}
}

// BenchmarkReceiverDuplicate measures redeliveries of a stored event (verify
// and one create that answers AlreadyExists).
func BenchmarkReceiverDuplicate(b *testing.B) {
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("senders=%d", workers), func(b *testing.B) {
			k := benchProvider(b)
			ev := fixture.KukoPayEvent{ID: "evt_dup", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_dup", MerchantRef: "dup", Amount: 1000, Currency: "USD"}
			body := ev.Body(b)
			if r := post(b, k, body); r != http.StatusOK {
				b.Fatalf("first delivery: %d", r)
			}
			lat := measure(b, k, workers, func(int) []byte { return body })
			report(b, lat)
		})
	}
}

func benchProvider(b *testing.B) kukoPay {
	b.Helper()
	k := kukoPay{ns: fixture.Namespace(b, env.Client, "bench"), name: "kukopay", secret: "bench-secret"}
	k.prov = fixture.CreateProvider(b, env.Client, fixture.Provider{
		Namespace: k.ns, Name: k.name, Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"current": k.secret},
	})
	fixture.WaitCached(b, rcv.Cache, k.prov)
	// One warm-up request builds the adapter and opens the connection.
	post(b, k, []byte(`{}`))
	return k
}

func post(b *testing.B, k kukoPay, body []byte) int {
	req, err := http.NewRequest("POST", k.url(), bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	// Signed per request, as every provider retry is.
	req.Header = fixture.KukoPayHeader(body, time.Now(), k.secret)
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// measure sends b.N requests with the given number of concurrent senders and
// returns each request's latency; every answer must be 200.
func measure(b *testing.B, k kukoPay, workers int, body func(i int) []byte) []time.Duration {
	lat := make([]time.Duration, b.N)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []int
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				code := post(b, k, body(i))
				lat[i] = time.Since(t0)
				if code != http.StatusOK {
					mu.Lock()
					bad = append(bad, code)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(bad) > 0 {
		b.Fatalf("%d requests not answered 200 (e.g. %d)", len(bad), bad[0])
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	return lat
}

func report(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	// Per-request latency is in p50/p99; ns/op would divide wall time by
	// requests and hide the concurrency.
	b.ReportMetric(0, "ns/op")
}
