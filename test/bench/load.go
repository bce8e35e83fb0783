package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// sender delivers event i one way or the other.
type sender interface {
	send(ctx context.Context, i int) error
}

var webhookClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 60 * time.Second},
}

// receiverSender posts event i to the receiver, signed at send time as a
// provider does on every attempt; anything but 200 is an error.
type receiverSender struct {
	url    string
	bodies [][]byte
}

func (r receiverSender) send(ctx context.Context, i int) error {
	body := r.bodies[i]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(kukopay.HeaderSignature, kukopay.SignatureHeaderValue(time.Now(), body, []byte(signingSecret)))
	resp, err := webhookClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return nil
}

// bareSender does the receiver's two acknowledged API writes for event i
// with a plain client and nothing else: create the same WebhookEvent, write
// the same Payment status (computed by the same state machine). It knows the
// payment's resourceVersion, so it never conflicts; it verifies nothing,
// resolves nothing and records no result. This is the ceiling of "store and
// apply" on this API server.
type bareSender struct {
	c        client.Client
	prov     *v1alpha1.PaymentProvider
	bodies   [][]byte
	payments []*v1alpha1.Payment
}

func (b bareSender) send(ctx context.Context, i int) error {
	_, err := b.store(ctx, i)
	return err
}

// stored is what the two acknowledged writes of one event wrote.
type stored struct {
	evt  *v1alpha1.WebhookEvent
	p    *v1alpha1.Payment
	from v1alpha1.PaymentPhase
	now  time.Time
}

// store makes the receiver's two acknowledged writes for event i.
func (b bareSender) store(ctx context.Context, i int) (stored, error) {
	ev, err := kukopay.ParseEvent(b.bodies[i])
	if err != nil {
		return stored{}, err
	}
	now := time.Now()
	evt, err := inbox.NewEvent(b.prov, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, now)
	if err != nil {
		return stored{}, err
	}
	p := b.payments[i]
	evt.Spec.Payment = p.Name
	if err := b.c.Create(ctx, evt); err != nil {
		return stored{}, fmt.Errorf("create event: %w", err)
	}
	from := p.Status.Phase
	// Stored as payment.Store stores it (status.closed with it).
	payment.ApplyEvent(p, payment.FromEvent(ev, v1alpha1.ViaWebhook), now).StoreIn(p)
	if err := b.c.Status().Update(ctx, p); err != nil {
		return stored{}, fmt.Errorf("update payment status: %w", err)
	}
	return stored{evt: evt, p: p, from: from, now: now}, nil
}

// fullSender is bareSender plus the two writes the receiver makes after its
// answer: the Kubernetes Event of the transition and the result on the
// WebhookEvent. It is the receiver's whole API cost without the receiver,
// to tell its own overhead from the cost of what it is asked to write.
type fullSender struct{ bareSender }

func (f fullSender) send(ctx context.Context, i int) error {
	w, err := f.store(ctx, i)
	if err != nil {
		return err
	}
	return f.record(ctx, w)
}

// record makes the two writes the receiver makes after its answer.
func (f fullSender) record(ctx context.Context, w stored) error {
	p, evt, now := w.p, w.evt, w.now
	note := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: fmt.Sprintf("%s.%x", p.Name, now.UnixNano())},
		EventTime:  metav1.NewMicroTime(now), ReportingController: "paywarden-receiver", ReportingInstance: "paywarden-receiver-bench",
		Action: string(v1alpha1.SourceWebhook), Reason: string(p.Status.Phase), Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Payment", Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		Note:      fmt.Sprintf("%s -> %s via Webhook", w.from, p.Status.Phase),
	}
	if err := f.c.Create(ctx, note); err != nil {
		return fmt.Errorf("create Kubernetes Event: %w", err)
	}
	evt.Status.Result, evt.Status.Message, evt.Status.Attempts = v1alpha1.ResultApplied, "payment "+p.Name, 1
	t := metav1.NewTime(now)
	evt.Status.AppliedAt = &t
	if err := f.c.Status().Update(ctx, evt); err != nil {
		return fmt.Errorf("record result: %w", err)
	}
	return nil
}

// ackedSender makes the same four writes as fullSender and answers after the
// first two, as the receiver does: the other two go to a bounded queue that
// a few workers write, and when it is full the sender writes them itself
// (the receiver's inbox.ResultQueue: 4 workers, backpressure). Its latency is
// an acknowledgement with the receiver's whole API cost behind it: the
// reference for the receiver's open-loop latency.
type ackedSender struct {
	fullSender
	jobs   chan stored
	wg     *sync.WaitGroup
	failed *atomic.Int64
}

func newAckedSender(f fullSender, queue, workers int) ackedSender {
	a := ackedSender{fullSender: f, jobs: make(chan stored, queue), wg: &sync.WaitGroup{}, failed: &atomic.Int64{}}
	for range workers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for w := range a.jobs {
				a.recordOrCount(w)
			}
		}()
	}
	return a
}

func (a ackedSender) send(ctx context.Context, i int) error {
	w, err := a.store(ctx, i)
	if err != nil {
		return err
	}
	select {
	case a.jobs <- w:
	default:
		a.recordOrCount(w)
	}
	return nil
}

func (a ackedSender) recordOrCount(w stored) {
	if err := a.record(context.Background(), w); err != nil {
		a.failed.Add(1)
	}
}

// close waits for the queued writes; it returns how many failed.
func (a ackedSender) close() int {
	close(a.jobs)
	a.wg.Wait()
	return int(a.failed.Load())
}

// run is what one load run measured.
type run struct {
	Events    int
	Elapsed   time.Duration
	Latencies []time.Duration
	Errors    int
	FirstErr  string
}

func (r run) perSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events-r.Errors) / r.Elapsed.Seconds()
}

// closedLoop sends events 0..n-1 with workers concurrent senders, each
// sending its next event as soon as the previous one is answered.
func closedLoop(ctx context.Context, s sender, n, workers int) run {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed failures
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				failed.record(s.send(ctx, i))
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return failed.result(n, time.Since(start), lat)
}

// openLoop starts event i at start + i/rate whatever happened to the
// earlier ones (no coordinated omission: a slow answer does not delay the
// next request), and measures each from its scheduled start.
func openLoop(ctx context.Context, s sender, n int, rate float64) run {
	lat := make([]time.Duration, n)
	var failed failures
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed.record(s.send(ctx, i))
			lat[i] = time.Since(at)
		}()
	}
	wg.Wait()
	return failed.result(n, time.Since(start), lat)
}

// failures counts the failed sends of a load run, from any number of
// goroutines, and keeps the first error.
type failures struct {
	n     atomic.Int64
	first atomic.Value
}

// record counts err when a send failed.
func (f *failures) record(err error) {
	if err != nil {
		f.n.Add(1)
		f.first.CompareAndSwap(nil, err.Error())
	}
}

// result is the run of n events that took elapsed, each with its latency in lat,
// and these failures.
func (f *failures) result(n int, elapsed time.Duration, lat []time.Duration) run {
	r := run{Events: n, Elapsed: elapsed, Latencies: lat, Errors: int(f.n.Load())}
	if e, ok := f.first.Load().(string); ok {
		r.FirstErr = e
	}
	return r
}
