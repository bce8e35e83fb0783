package inbox

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// ResultQueue records the results of applied events after the caller has
// moved on: the webhook receiver acknowledges an event once it is stored and
// applied (two API writes), and the result on the record follows. A result
// that is never written (a crash, a full queue under shutdown) leaves the
// record Pending; the inbox processor applies it again after its grace
// period, the state machine answers Duplicate, and the record is marked
// "applied by an earlier attempt". Nothing is lost, only delayed.
type ResultQueue struct {
	jobs    chan resultJob
	timeout time.Duration
	wg      sync.WaitGroup
	start   sync.Once
	workers int
	closing chan struct{}
}

type resultJob struct {
	in     *Inbox
	evt    *v1alpha1.WebhookEvent
	result v1alpha1.EventResult
	msg    string
}

// NewResultQueue holds up to size results, written by workers goroutines,
// each write bounded by timeout.
func NewResultQueue(size, workers int, timeout time.Duration) *ResultQueue {
	return &ResultQueue{jobs: make(chan resultJob, size), workers: max(workers, 1), timeout: timeout, closing: make(chan struct{})}
}

// add queues a result; when the queue is full the caller writes it itself
// (backpressure rather than loss).
func (q *ResultQueue) add(ctx context.Context, j resultJob) {
	q.start.Do(func() {
		for range q.workers {
			q.wg.Add(1)
			go q.work()
		}
	})
	select {
	case q.jobs <- j:
	default:
		q.write(ctx, j)
	}
}

func (q *ResultQueue) work() {
	defer q.wg.Done()
	for {
		select {
		case j := <-q.jobs:
			q.write(context.Background(), j)
		case <-q.closing:
			// Drain what is queued, then stop.
			for {
				select {
				case j := <-q.jobs:
					q.write(context.Background(), j)
				default:
					return
				}
			}
		}
	}
}

func (q *ResultQueue) write(ctx context.Context, j resultJob) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.timeout)
	defer cancel()
	if err := j.in.setResult(ctx, j.evt, j.result, j.msg); err != nil {
		ctrl.Log.WithName("inbox").V(1).Info("result not recorded; the inbox processor will", "event", j.evt.Name, "error", err.Error())
	}
}

// Close writes what is queued and stops the workers, or gives up when ctx
// ends (the inbox processor finishes those records).
func (q *ResultQueue) Close(ctx context.Context) {
	select {
	case <-q.closing:
		return
	default:
		close(q.closing)
	}
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
