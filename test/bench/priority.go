package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
)

// CreateWait is how long a new payment's create waits for its provider's
// token while a backlog of status queries is due (issue 23), measured in
// process through the gateway (gateway.Entry.Admit, the real token bucket,
// the real clock): Due queries ask at once, each coming back when it is told
// as its reconcile would, and Creates creates arrive one after the other
// while they drain. Each create's wait is from its first Admit to its token.
//
// FIFO is the same run with every call at one priority: the gateway before
// issue 23, which served the bucket's reserved tokens strictly in the order
// they were asked for.
type CreateWait struct {
	Due             int     `json:"due"`
	QPS             int32   `json:"qps"`
	Burst           int32   `json:"burst"`
	Creates         int     `json:"creates"`
	TokenIntervalMs float64 `json:"tokenIntervalMs"`
	P50Ms           float64 `json:"p50Ms"`
	MaxMs           float64 `json:"maxMs"`
	FIFOP50Ms       float64 `json:"fifoP50Ms"`
	FIFOMaxMs       float64 `json:"fifoMaxMs"`
}

// createWaitCreates is how many creates a run measures: they arrive every
// createWaitEvery from the moment every query has asked.
const (
	createWaitCreates = 10
	createWaitEvery   = 500 * time.Millisecond
)

// priorities measures CreateWait at the backlog provider's bucket with 2000
// queries due. It needs no cluster.
func (b *bench) priorities(ctx context.Context) error {
	w, err := MeasureCreateWait(ctx, 2000, b.opts.BacklogQPS, b.opts.BacklogBurst)
	if err != nil {
		return err
	}
	b.res.CreateWait = w
	b.logf("create wait behind %d due queries at qps %d: p50 %.1f ms, max %.1f ms (FIFO: p50 %.0f ms)", w.Due, w.QPS, w.P50Ms, w.MaxMs, w.FIFOP50Ms)
	return nil
}

// MeasureCreateWait runs the measurement twice: with priorities (creates at
// gateway.Money) and FIFO (creates at gateway.Scheduled, like the queries).
func MeasureCreateWait(ctx context.Context, due int, qps, burst int32) (CreateWait, error) {
	w := CreateWait{Due: due, QPS: qps, Burst: burst, Creates: createWaitCreates, TokenIntervalMs: 1000 / float64(qps)}
	for _, run := range []struct {
		prio     gateway.Priority
		p50, max *float64
	}{
		{gateway.Money, &w.P50Ms, &w.MaxMs},
		{gateway.Scheduled, &w.FIFOP50Ms, &w.FIFOMaxMs},
	} {
		waits, err := createWaits(ctx, due, qps, burst, run.prio)
		if err != nil {
			return w, err
		}
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		*run.p50 = ms(waits[len(waits)/2])
		*run.max = ms(waits[len(waits)-1])
	}
	return w, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// createWaits is one run: a fresh provider entry, due queries asking at
// once, then the creates at prio.
func createWaits(ctx context.Context, due int, qps, burst int32, prio gateway.Priority) ([]time.Duration, error) {
	e, err := benchEntry(ctx, qps, burst)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var asked, queries sync.WaitGroup
	asked.Add(due)
	queries.Add(due)
	for i := 0; i < due; i++ {
		go func(key string) {
			defer queries.Done()
			first := true
			_ = admit(ctx, e, key, gateway.Scheduled, func() {
				if first {
					first = false
					asked.Done()
				}
			})
		}(fmt.Sprintf("query-%d", i))
	}
	asked.Wait()
	waits := make([]time.Duration, createWaitCreates)
	errs := make([]error, createWaitCreates)
	var creates sync.WaitGroup
	for i := 0; i < createWaitCreates; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(createWaitEvery):
		}
		creates.Add(1)
		go func(i int) {
			defer creates.Done()
			start := time.Now()
			errs[i] = admit(ctx, e, fmt.Sprintf("create-%d", i), prio, nil)
			waits[i] = time.Since(start)
		}(i)
	}
	creates.Wait()
	stop()
	queries.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return waits, nil
}

// admit asks for key's token until it has it, sleeping as long as it is told
// each time (a reconcile handed back with RequeueAfter); asked runs after
// each ask.
func admit(ctx context.Context, e *gateway.Entry, key string, prio gateway.Priority, asked func()) error {
	for {
		adm := e.Admit(key, prio, time.Now())
		if asked != nil {
			asked()
		}
		if adm.OK {
			return nil
		}
		if adm.Reason != gateway.DeferRateLimited {
			return fmt.Errorf("%s deferred: %s", key, adm.Reason)
		}
		t := time.NewTimer(adm.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// benchEntry is a KukoPay provider's gateway entry as the manager builds it
// (no call goes out: only admissions are measured).
func benchEntry(ctx context.Context, qps, burst int32) (*gateway.Entry, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "kukopay-credentials"}, Data: map[string][]byte{"apiKey": []byte("sk_test")}}
	gw := &gateway.Gateway{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(creds).Build()}
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1/kukopay",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
			StatusQuery:          v1alpha1.StatusQueryConfig{QPS: ptr.To(qps), Burst: ptr.To(burst)},
		},
	}
	return gw.For(ctx, prov)
}
