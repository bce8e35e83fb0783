package paymentcache

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

func settled() *v1alpha1.Payment {
	at := metav1.NewTime(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "p", UID: types.UID("uid-p"), ResourceVersion: "42", Generation: 3,
			Annotations:   map[string]string{"team": "x", "kubectl.kubernetes.io/last-applied-configuration": "{big}"},
			Finalizers:    []string{v1alpha1.FinalizerMoneyInFlight},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "paywarden", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kuko"}, MerchantReference: "order-1", IdempotencyKey: "key-1",
			Description: "the whole object", Amount: v1alpha1.Amount{Value: 500, Currency: "USD"},
		},
		Status: v1alpha1.PaymentStatus{
			Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pay_p", Closed: true,
			History:        []v1alpha1.HistoryEntry{{To: v1alpha1.PhasePending}, {Time: at, To: v1alpha1.PhaseSucceeded}},
			Conditions:     []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "long text"}},
			AmountReceived: &v1alpha1.Money{Value: 500, Currency: "USD"},
		},
	}
}

// decoded is p as the thin cache keeps it: decoded from the API server's
// JSON and judged for c's options.
func decoded(t *testing.T, c *Cache, p *v1alpha1.Payment) *Entry {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if e.odd == nil || e.odd.whole == nil {
		t.Fatal("decoded entry has no payment to judge")
	}
	o, err := c.judge(&e)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*Entry)
}

func testCache() *Cache {
	byRef := func(o client.Object) []string { return []string{o.(*v1alpha1.Payment).Spec.MerchantReference} }
	byID := func(o client.Object) []string { return []string{payment.ProviderID(o.(*v1alpha1.Payment)), "shared"} }
	return &Cache{
		names:   []string{"byID", "byRef"},
		indexes: map[string]client.IndexerFunc{"byRef": byRef, "byID": byID},
		wake:    func(p *v1alpha1.Payment) bool { return p.Annotations["team"] == "x" },
	}
}

// An entry keeps the payment's identity and the answers about it, judged on
// the whole payment, and lets the payment go.
func TestAnEntryKeepsTheAnswersNotThePayment(t *testing.T) {
	p := settled()
	e := decoded(t, testCache(), p)
	switch {
	case e.odd != nil && e.odd.whole != nil:
		t.Error("the judged entry still holds the decoded payment")
	case e.GetNamespace() != "shop" || e.GetName() != "p" || e.GetUID() != "uid-p" || e.GetResourceVersion() != "42":
		t.Errorf("identity = %s/%s %s %s", e.GetNamespace(), e.GetName(), e.GetUID(), e.GetResourceVersion())
	case e.Provider() != "kuko" || e.Phase() != v1alpha1.PhaseSucceeded || !e.Closed() || e.Deleting():
		t.Errorf("provider %q phase %q closed %v deleting %v", e.Provider(), e.Phase(), e.Closed(), e.Deleting())
	case !e.Wake():
		t.Error("Wake was not judged on the payment")
	case !e.RetentionSince().Equal(payment.RetentionSince(p)) || e.RetentionHeld():
		t.Errorf("retention since %s held %v, want %s and not held", e.RetentionSince(), e.RetentionHeld(), payment.RetentionSince(p))
	case e.News() != News(p):
		t.Error("News differs from the payment's")
	case !e.has(1, "order-1") || !e.has(0, "pay_p") || !e.has(0, "shared") || e.has(0, "order-1") || e.has(1, "pay_p"):
		t.Errorf("index keys wrong: %v", e.keyHashes())
	}
	// A payment as the API server writes it (a UUID, a decimal
	// resourceVersion) and not being deleted has no odd fields.
	typical := settled()
	typical.UID = "6f1c2a9e-0b7d-4c11-9a3e-0123456789ab"
	if e := decoded(t, testCache(), typical); e.odd != nil {
		t.Errorf("a typical payment's entry has odd fields %+v", e.odd)
	}
	c := testCache()
	if !c.Has(e, "byRef", "order-1") || c.Has(e, "byID", "order-1") || c.Has(e, "byNothing", "order-1") {
		t.Error("Has does not answer by index name")
	}
	if again, _ := testCache().judge(e); again.(*Entry) != e || len(e.keyHashes()) != 3 {
		t.Errorf("judging twice changed the entry: %v", e.keyHashes())
	}
	// What it reads back as: identity, provider, phase, closed; nothing that
	// moves money.
	back := e.payment()
	if back.Spec.Description != "" || back.Spec.Amount.Value != 0 || back.Status.AmountReceived != nil || back.Name != "p" || !back.Status.Closed {
		t.Errorf("read back as %+v", back)
	}

	held := settled()
	held.Status.Conditions = append(held.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: "Conflict"})
	now := metav1.Now()
	held.DeletionTimestamp = &now
	if e := decoded(t, testCache(), held); !e.RetentionHeld() || !e.Deleting() {
		t.Errorf("a payment under review, being deleted: held %v deleting %v", e.RetentionHeld(), e.Deleting())
	}
	// The bookmark that ends a watch's initial events: the reflector waits
	// for its mark, the one annotation an entry keeps.
	mark := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	if e := decoded(t, testCache(), mark); e.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" || e.GetResourceVersion() != "7" {
		t.Errorf("the initial events' bookmark reads back as %v at %s", e.GetAnnotations(), e.GetResourceVersion())
	}
	if e.GetAnnotations() != nil {
		t.Errorf("a payment's annotations read back as %v, want none", e.GetAnnotations())
	}
	if e := decoded(t, &Cache{}, p); e.Wake() || len(e.keyHashes()) != 0 {
		t.Errorf("a cache without options judged wake %v, keys %v", e.Wake(), e.keyHashes())
	}
}

// News changes with everything that is news to the reconciler and with
// nothing else.
func TestNewsChangesWithWhatIsNews(t *testing.T) {
	base := News(settled())
	seen := metav1.Now()
	for name, change := range map[string]func(p *v1alpha1.Payment){
		"spec (generation)":       func(p *v1alpha1.Payment) { p.Generation++ },
		"an annotation added":     func(p *v1alpha1.Payment) { p.Annotations[v1alpha1.AnnotationRequery] = "1" },
		"an annotation changed":   func(p *v1alpha1.Payment) { p.Annotations["team"] = "y" },
		"an annotation removed":   func(p *v1alpha1.Payment) { delete(p.Annotations, "team") },
		"phase":                   func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhaseRefunded },
		"provider id":             func(p *v1alpha1.Payment) { p.Status.ProviderPaymentID = "pay_q" },
		"a refund's failure seen": func(p *v1alpha1.Payment) { p.Status.RefundFailureSeenAt = &seen },
	} {
		p := settled()
		change(p)
		if News(p) == base {
			t.Errorf("%s: News unchanged", name)
		}
	}
	a, b := settled(), settled()
	a.Annotations, b.Annotations = map[string]string{"ab": "c"}, map[string]string{"a": "bc"}
	if News(a) == News(b) {
		t.Error("News does not tell an annotation's key from its value")
	}
	a.Annotations, b.Annotations = map[string]string{"a": "b\x00\x01\x00\x00\x00\x00\x00\x00\x00c"}, map[string]string{"a": "b", "\x00": "c"}
	if News(a) == News(b) {
		t.Error("News does not tell one annotation from two")
	}
	p := settled()
	p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"metadata":{"labels":{"team":"y"}}}`
	p.Labels = map[string]string{"team": "y"}
	p.ResourceVersion, p.Status.Conditions, p.Status.AmountReceived = "43", nil, nil
	p.Status.History = append(p.Status.History, v1alpha1.HistoryEntry{To: v1alpha1.PhaseSucceeded})
	if News(p) != base {
		t.Error("News changed with no news (labels and kubectl's copy of the manifest, version, conditions, amount, history)")
	}
}

// An entry reads back the UID it was given, whether kept in 16 bytes (a
// UUID as the API server writes it) or as given.
func TestAnEntryKeepsItsUID(t *testing.T) {
	for _, uid := range []types.UID{
		"6f1c2a9e-0b7d-4c11-9a3e-0123456789ab", "ffffffff-ffff-ffff-ffff-ffffffffffff",
		"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000001",
		"6F1C2A9E-0B7D-4C11-9A3E-0123456789AB", "6f1c2a9e+0b7d-4c11-9a3e-0123456789ab", "6f1c2a9e-0b7d-4c11-9a3e-0123456789a",
		"6f1c2a9e-0b7d-4c11-9a3e-0123456789ag", "uid-p", "",
	} {
		readsBack(t, "UID", string(uid), func(e *Entry, v string) { e.SetUID(types.UID(v)) },
			func(e *Entry) string { return string(e.GetUID()) }, func(p *v1alpha1.Payment) string { return string(p.UID) })
	}
	var e Entry
	if e.SetUID("6f1c2a9e-0b7d-4c11-9a3e-0123456789ab"); e.odd != nil {
		t.Errorf("a UUID is kept as the string %q, not in 16 bytes", e.odd.uid)
	}
	if e.SetUID("uid-p"); e.GetUID() != "uid-p" || e.uid != [16]byte{} {
		t.Errorf("a UID set over a UUID reads back as %q", e.GetUID())
	}
	if e.SetUID("6f1c2a9e-0b7d-4c11-9a3e-0123456789ab"); e.odd != nil || e.GetUID() != "6f1c2a9e-0b7d-4c11-9a3e-0123456789ab" {
		t.Errorf("a UUID set over another UID reads back as %q (odd fields %+v)", e.GetUID(), e.odd)
	}
}

// readsBack checks that v, set on an entry over another value, reads back
// from the entry and from the payment it reads back as.
func readsBack(t *testing.T, field, v string, set func(*Entry, string), get func(*Entry) string, ofPayment func(*v1alpha1.Payment) string) {
	t.Helper()
	var e Entry
	set(&e, "99")
	set(&e, v)
	if got := get(&e); got != v {
		t.Errorf("%s %q read back as %q", field, v, got)
	}
	if got := ofPayment(e.payment()); got != v {
		t.Errorf("%s %q read back from the payment as %q", field, v, got)
	}
}

// An entry reads back the resourceVersion it was given, kept as a number
// when it is one as the API server writes it.
func TestAnEntryKeepsItsResourceVersion(t *testing.T) {
	for _, rv := range []string{"0", "1", "42", "18446744073709551614", "18446744073709551615", "18446744073709551616", "007", "+7", "-1", "1_0", "abc", " 42", ""} {
		readsBack(t, "resourceVersion", rv, (*Entry).SetResourceVersion,
			(*Entry).GetResourceVersion, func(p *v1alpha1.Payment) string { return p.ResourceVersion })
	}
	var e Entry
	if e.SetResourceVersion("123456"); e.odd != nil || e.rv == 0 {
		t.Errorf("a decimal resourceVersion is kept as the string %+v, not as a number", e.odd)
	}
	if e.SetResourceVersion("x1"); e.rv != 0 || e.GetResourceVersion() != "x1" {
		t.Errorf("a resourceVersion set over a number reads back as %q", e.GetResourceVersion())
	}
}

// What few entries have (a deletion, index keys past those kept in the
// entry) reads back, survives a copy unshared, and costs nothing once gone.
func TestAnEntryKeepsItsOddFieldsApart(t *testing.T) {
	var hs []uint64
	for i := range inlineKeys + 2 {
		hs = append(hs, tagged(i, "k"))
	}
	e := entryWith("shop", "p", append(hs, hs[0], hs[inlineKeys])...)
	if got := e.keyHashes(); !slices.Equal(got, hs) {
		t.Fatalf("keys = %v, want %v each once", got, hs)
	}
	for i := range hs {
		if !e.has(i, "k") || e.has(i, "other") {
			t.Errorf("has(%d) wrong", i)
		}
	}
	now := metav1.Now()
	e.SetDeletionTimestamp(&now)
	c := e.DeepCopyObject().(*Entry)
	if !c.Deleting() || !slices.Equal(c.keyHashes(), hs) || c.odd == e.odd || &c.odd.keys[0] == &e.odd.keys[0] || c.GetDeletionTimestamp() == e.GetDeletionTimestamp() {
		t.Errorf("the copy shares or lost the odd fields: %+v", c.odd)
	}
	c.addKey(tagged(7, "more"))
	if len(e.keyHashes()) != len(hs) {
		t.Error("a key added to the copy was added to the original")
	}
	few := entryWith("shop", "q", hs[:inlineKeys]...)
	few.SetDeletionTimestamp(&now)
	if few.SetDeletionTimestamp(nil); few.odd != nil || few.Deleting() {
		t.Errorf("odd fields kept once none is left: %+v", few.odd)
	}
}

// entryWith is an entry of ns/name with the index keys' hashes hs.
func entryWith(ns, name string, hs ...uint64) *Entry {
	e := &Entry{namespace: intern(ns), name: name}
	for _, h := range hs {
		e.addKey(h)
	}
	return e
}

// A copy of an Entry (an item of a List, *e) shares nothing a setter
// writes: setting a field on it leaves the entry it was copied from, which
// the informer's store may hold and other goroutines read, as it was.
func TestSettingACopyLeavesTheOriginal(t *testing.T) {
	odd := func() *Entry {
		p := settled()
		p.UID, p.ResourceVersion = "uid-not-a-uuid", "rv-not-a-number"
		p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		return EntryOf(p)
	}
	stored := odd()
	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := s.Add(stored); err != nil {
		t.Fatal(err)
	}
	c := &Cache{buckets: DefaultBuckets, stores: []toolscache.Store{s}}
	var l EntryList
	if err := c.List(context.Background(), &l, client.InNamespace("shop")); err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %d items, %v", len(l.Items), err)
	}
	copied := *odd()
	for _, it := range []*Entry{&l.Items[0], &copied} {
		it.SetResourceVersion("43")
		it.SetUID("6f1c2a9e-0b7d-4c11-9a3e-0123456789ab")
		it.SetDeletionTimestamp(nil)
		it.addKey(tagged(5, "more"))
	}
	for _, e := range []*Entry{stored, odd()} {
		if e.GetResourceVersion() != "rv-not-a-number" || e.GetUID() != "uid-not-a-uuid" || !e.Deleting() || len(e.keyHashes()) != 0 {
			t.Errorf("setters on a copy changed the original: rv %q uid %q deleting %v keys %v", e.GetResourceVersion(), e.GetUID(), e.Deleting(), e.keyHashes())
		}
	}
}

// An Entry is 128 bytes (a size class of the Go allocator): a field added
// costs every settled payment the next class, 144 bytes.
func TestAnEntryIs128Bytes(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 128 {
		t.Errorf("Entry is %d bytes, over 128", n)
	}
}
