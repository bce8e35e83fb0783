package paymentcache

import (
	"encoding/json"
	"fmt"
	"maps"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// settledLike is a settled payment as the API server serves it after a
// create, a webhook and a refund: four history entries, three conditions,
// managed fields of two writers.
func settledLike(i int) *v1alpha1.Payment {
	at := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, i%60, 0, time.UTC))
	ref := fmt.Sprintf("order-%06d", i)
	p := settled()
	p.Name, p.UID = ref, types.UID(fmt.Sprintf("6f1c2a9e-0b7d-4c11-9a3e-%012d", i))
	p.Spec.MerchantReference, p.Spec.IdempotencyKey = ref, "pw-"+ref+"-create-0f3a9c"
	p.Spec.Description = "Order " + ref + " for the spring collection"
	p.Status.ProviderPaymentID = "pay_" + ref
	p.Status.AmountRefunded = &v1alpha1.Money{Value: 200, Currency: "USD"}
	p.Status.History = nil
	for j, to := range []v1alpha1.PaymentPhase{v1alpha1.PhasePending, v1alpha1.PhaseProcessing, v1alpha1.PhaseSucceeded, v1alpha1.PhasePartiallyRefunded} {
		p.Status.History = append(p.Status.History, v1alpha1.HistoryEntry{Time: at, To: to, Reason: "ProviderReported", EventID: fmt.Sprintf("evt_%s_%d", ref, j)})
	}
	p.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Settled", Message: "the provider reports the payment settled", LastTransitionTime: at},
		{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionFalse, Reason: "Consistent", Message: "nothing to review", LastTransitionTime: at},
		{Type: v1alpha1.ConditionDisputed, Status: metav1.ConditionFalse, Reason: "NoDispute", Message: "no dispute open", LastTransitionTime: at},
	}
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "paywarden", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "payments.paywarden.dev/v1alpha1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{},"f:history":{},"f:conditions":{},"f:closed":{}}}`)}, Subresource: "status"},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "payments.paywarden.dev/v1alpha1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:amount":{},"f:merchantReference":{},"f:providerRef":{}}}`)}},
	}
	return p
}

// managerLikeCache is a thin cache with the manager's three look-up
// indexes: a settled payment has a key in each (its merchant reference,
// provider id and idempotency key).
func managerLikeCache() *Cache {
	p := func(o client.Object) *v1alpha1.Payment { return o.(*v1alpha1.Payment) }
	idx := map[string]client.IndexerFunc{
		"byRef": func(o client.Object) []string { return []string{p(o).Spec.MerchantReference} },
		"byID":  func(o client.Object) []string { return []string{payment.ProviderID(p(o))} },
		"byKey": func(o client.Object) []string { return []string{p(o).Spec.IdempotencyKey} },
	}
	return &Cache{names: slices.Sorted(maps.Keys(idx)), indexes: idx}
}

// held is the heap that what build returns holds, after a collection.
func held(build func() any) float64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	kept := build()
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	goruntime.KeepAlive(kept)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// BenchmarkHeldPerSettledPayment measures the heap a cache holds per
// settled payment: the thin cache's Entry (decoded and judged as its
// informer does, with the manager's three look-up indexes' keys) against
// the whole Payment the typed cache held before payments closed (decoded,
// managed fields stripped as controller-runtime's cache strips them), in
// the same run. Neither counts the informer's store and index maps.
func BenchmarkHeldPerSettledPayment(b *testing.B) {
	const n = 10000
	raws := make([][]byte, n)
	for i := range raws {
		raw, err := json.Marshal(settledLike(i))
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	c := managerLikeCache()
	var whole, thin float64
	for b.Loop() {
		whole = held(func() any {
			ps := make([]*v1alpha1.Payment, n)
			for i, raw := range raws {
				ps[i] = &v1alpha1.Payment{}
				if err := json.Unmarshal(raw, ps[i]); err != nil {
					b.Fatal(err)
				}
				ps[i].ManagedFields = nil
			}
			return ps
		})
		thin = held(func() any {
			es := make([]*Entry, n)
			for i, raw := range raws {
				es[i] = &Entry{}
				if err := json.Unmarshal(raw, es[i]); err != nil {
					b.Fatal(err)
				}
				if _, err := c.judge(es[i]); err != nil {
					b.Fatal(err)
				}
			}
			return es
		})
	}
	b.ReportMetric(whole/n, "B/payment")
	b.ReportMetric(thin/n, "B/entry")
	b.ReportMetric(whole/thin, "payment/entry")
}

// BenchmarkHeldPerSettledPaymentInTheStore measures the heap the thin cache
// holds per settled payment with its informer's store and indexes: each
// payment decoded as the informer's watch decodes it (the API server's
// JSON through the thin scheme's decoder, which sets the kind), judged, and
// added to a client-go indexer with the cache's three look-up indexes.
func BenchmarkHeldPerSettledPaymentInTheStore(b *testing.B) {
	const n = 20000
	raws := make([][]byte, n)
	for i := range raws {
		p := settledLike(i)
		p.APIVersion, p.Kind = v1alpha1.GroupVersion.String(), "Payment"
		raw, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	c := managerLikeCache()
	c.buckets = DefaultBuckets
	info, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(thinScheme()).SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		b.Fatal("no JSON serializer")
	}
	dec := runtime.WithoutVersionDecoder{Decoder: info.Serializer}
	var stored float64
	for b.Loop() {
		stored = held(func() any {
			store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, c.indexers())
			for _, raw := range raws {
				obj, _, err := dec.Decode(raw, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				e, err := c.judge(obj)
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Add(e); err != nil {
					b.Fatal(err)
				}
			}
			return store
		})
	}
	b.ReportMetric(stored/n, "B/payment")
}
