package inbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// heldQueue is a ResultQueue whose workers never start: what it is given
// stays in q.jobs, where a test can see it.
func heldQueue(size int) *ResultQueue {
	q := NewResultQueue(size, 1, time.Minute)
	q.start.Do(func() {})
	return q
}

// queueWorld is an inbox whose API server, like a real one's client, refuses
// a request whose context is done; onWrite, when set, sees each status write
// of a WebhookEvent first.
func queueWorld(t *testing.T, onWrite func(ctx context.Context), objs ...client.Object) (*Inbox, client.WithWatch) {
	t.Helper()
	c := fakeAPI(t, objs...)
	live := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*v1alpha1.WebhookEvent); ok && onWrite != nil {
				onWrite(ctx)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	return &Inbox{Client: live, Reader: live, APIReader: live, Clock: clocktesting.NewFakePassiveClock(t0)}, c
}

// storedEvents creates n inbox records and their result jobs (Applied).
func storedEvents(t *testing.T, in *Inbox, c client.Client, n int) []resultJob {
	t.Helper()
	jobs := make([]resultJob, 0, n)
	for i := range n {
		id := fmt.Sprintf("evt-%d", i)
		evt, err := NewEvent(testProvider, provider.Event{ID: id, Type: "payment.succeeded", Raw: []byte(`{"id":"` + id + `"}`)}, v1alpha1.ViaWebhook, "kukopay", t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, resultJob{in: in, evt: evt, result: v1alpha1.ResultApplied, msg: "applied"})
	}
	return jobs
}

// results are the results stored on the jobs' records, in order.
func results(t *testing.T, c client.Client, jobs []resultJob) []v1alpha1.EventResult {
	t.Helper()
	out := make([]v1alpha1.EventResult, 0, len(jobs))
	for _, j := range jobs {
		got := &v1alpha1.WebhookEvent{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(j.evt), got); err != nil {
			t.Fatal(err)
		}
		out = append(out, got.Status.Result)
	}
	return out
}

// within fails the test unless f returns in a few seconds (a watchdog for a
// call that would block for good, not a wait for a schedule).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// With a result queue, Receive acknowledges an applied event before its
// result is on the record (the queue writes it); a result that is not final
// (Orphaned: the event waits for its payment) is written before Receive
// returns, as without a queue.
func TestReceiveQueuesOnlyFinishedResults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		payments []client.Object
		result   v1alpha1.EventResult
		queued   int
		recorded v1alpha1.EventResult
	}{
		{"an applied event: its result is queued", []client.Object{func() *v1alpha1.Payment {
			p := paidOrder()
			p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
			return p
		}()}, v1alpha1.ResultApplied, 1, ""},
		{"an orphaned event: its result is recorded at once", nil, v1alpha1.ResultOrphaned, 0, v1alpha1.ResultOrphaned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, c := queueWorld(t, nil, tc.payments...)
			in.Results = heldQueue(4)
			ev := provider.Event{ID: "evt-1", Type: "payment.failed", Status: provider.StatusFailed, Supported: true, OccurredAt: t0,
				PaymentID: "pay_1", Raw: []byte(`{"id":"evt-1"}`)}
			prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}}
			out, err := in.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, "kukopay", 0)
			if err != nil || out.Result != tc.result {
				t.Fatalf("result %s (%s) %v, want %s", out.Result, out.Message, err, tc.result)
			}
			if got := len(in.Results.jobs); got != tc.queued {
				t.Errorf("%d results queued, want %d", got, tc.queued)
			}
			if got := results(t, c, []resultJob{{evt: out.Event}})[0]; got != tc.recorded {
				t.Errorf("record says %q on return, want %q", got, tc.recorded)
			}
		})
	}
}

// The queue holds up to its size; past it the caller writes the result
// itself (backpressure, not loss), on a context the caller's end does not
// cancel, bounded by the queue's timeout.
func TestAFullResultQueueHasTheCallerWrite(t *testing.T) {
	var deadline time.Time
	in, c := queueWorld(t, func(ctx context.Context) { deadline, _ = ctx.Deadline() })
	jobs := storedEvents(t, in, c, 2)
	q := heldQueue(1)
	q.timeout = 5 * time.Second
	done, cancel := context.WithCancel(context.Background())
	cancel() // the request that applied the events has ended
	for _, j := range jobs {
		q.add(done, j)
	}
	if got := results(t, c, jobs); got[0] != "" || got[1] != v1alpha1.ResultApplied || len(q.jobs) != 1 {
		t.Errorf("results %q with %d queued; want the first queued, unwritten, and the second written by its caller", got, len(q.jobs))
	}
	if left := time.Until(deadline); left <= 0 || left > q.timeout {
		t.Errorf("the caller's write has %s left, want at most the queue's %s", left, q.timeout)
	}
}

// Workers write what is queued (at least one, whatever was asked); Close
// writes what is still queued, then returns, and a second Close is harmless.
func TestResultQueueWorkersAndClose(t *testing.T) {
	t.Run("a queue asked for no workers still has one", func(t *testing.T) {
		in, c := queueWorld(t, nil)
		jobs := storedEvents(t, in, c, 1)
		q := NewResultQueue(4, 0, time.Minute)
		q.add(context.Background(), jobs[0])
		within(t, "Close", func() { q.Close(context.Background()) })
		within(t, "a second Close", func() { q.Close(context.Background()) })
		if got := results(t, c, jobs)[0]; got != v1alpha1.ResultApplied {
			t.Errorf("record says %q after Close, want Applied", got)
		}
	})
	t.Run("what is queued when Close is called is written", func(t *testing.T) {
		in, c := queueWorld(t, nil)
		// Many, so a worker that stopped on Close without draining would be
		// caught whichever ready case it happened to pick first.
		jobs := storedEvents(t, in, c, 20)
		q := heldQueue(len(jobs))
		for _, j := range jobs {
			q.add(context.Background(), j)
		}
		within(t, "Close", func() { q.Close(context.Background()) })
		// The worker starts only now: it finds Close called and the jobs queued.
		q.wg.Add(1)
		within(t, "the worker", q.work)
		for i, got := range results(t, c, jobs) {
			if got != v1alpha1.ResultApplied {
				t.Fatalf("record %d says %q after Close, want Applied", i, got)
			}
		}
	})
	t.Run("Close gives up when its context ends; a second Close does not wait again", func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		in, c := queueWorld(t, func(context.Context) { close(entered); <-release })
		jobs := storedEvents(t, in, c, 1)
		q := NewResultQueue(4, 1, time.Minute)
		within(t, "add", func() { q.add(context.Background(), jobs[0]) })
		within(t, "the worker's write", func() { <-entered }) // it is out and does not come back
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		within(t, "Close with its context ended", func() { q.Close(ended) })
		within(t, "a second Close", func() { q.Close(context.Background()) })
		close(release)
		within(t, "the worker, after its write came back", q.wg.Wait)
	})
}
