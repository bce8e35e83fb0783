package paymentcache

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	"math"
	kjson "sigs.k8s.io/json"
	"slices"
	"strconv"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// Entry is what the thin cache keeps of a Payment: who it is, its provider
// and phase, whether it is closed or being deleted, and a few answers about
// it, each judged on the payment as it was decoded and kept as a word:
//
//   - News, which changes when anything that is news to the payment's
//     reconciler changes (News);
//   - Wake, what Options.Wake said of it (a closed payment a start must
//     wake);
//   - RetentionSince and RetentionHeld (payment.RetentionSince,
//     payment.RetentionHold);
//   - hashes of the keys the cache's indexes find it by.
//
// Nothing else of the payment is kept, not even while the cache lists every
// payment at start: the informer's transform judges each one as it arrives
// and lets the decoded payment go.
type Entry struct {
	name                        string
	namespace, provider, phase  handle
	uid                         [16]byte // a UUID's bytes; zero when odd holds the UID
	rv                          uint64   // a decimal resourceVersion + 1; 0 when odd holds it
	news                        uint64
	retentionSince              int64
	keys                        [inlineKeys]uint64 // the first index keys' hashes (tagged)
	nkeys                       uint8              // how many of keys are set
	closed, wake, retentionHeld bool
	initialEventsEnd            bool // the bookmark that ends a watch's initial events
	odd                         *oddFields
}

// inlineKeys is how many index keys an entry keeps in itself (the entry is
// 128 bytes with four): a payment has its merchant reference, its
// idempotency key and one provider id, or two (a Stripe Checkout's session
// and payment intent); more only while a tracked payment's ids differ.
const inlineKeys = 4

// oddFields are what few entries have, kept apart so that the others do
// not pay for them: a UID that is not a UUID, a resourceVersion that is not
// a decimal number, a deletion, index keys past inlineKeys, and the payment
// as decoded until the cache's transform judges it.
type oddFields struct {
	uid             types.UID
	resourceVersion string
	deletion        *metav1.Time
	keys            []uint64
	whole           *digest
}

func (o *oddFields) empty() bool {
	return o.uid == "" && o.resourceVersion == "" && o.deletion == nil && len(o.keys) == 0 && o.whole == nil
}

// handle is a string kept once for every entry that has it (namespaces,
// providers, phases), in one word; the zero handle is the empty string.
type handle struct{ h unique.Handle[string] }

func intern(s string) handle {
	if s == "" {
		return handle{}
	}
	return handle{unique.Make(s)}
}

func (h handle) String() string {
	if h == (handle{}) {
		return ""
	}
	return h.h.Value()
}

// EntryList is a list of Entries.
type EntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Entry `json:"items"`
}

// Provider is the name of the payment's provider (spec.providerRef).
func (e *Entry) Provider() string { return e.provider.String() }

// Phase is the payment's phase.
func (e *Entry) Phase() v1alpha1.PaymentPhase { return v1alpha1.PaymentPhase(e.phase.String()) }

// Closed reports status.closed.
func (e *Entry) Closed() bool { return e.closed }

// Deleting reports whether the payment is being deleted.
func (e *Entry) Deleting() bool { return e.odd != nil && e.odd.deletion != nil }

// News is News of the payment: it differs between two versions whose news
// to the reconciler differ.
func (e *Entry) News() uint64 { return e.news }

// Wake is what Options.Wake said of the payment.
func (e *Entry) Wake() bool { return e.wake }

// RetentionSince is payment.RetentionSince of the payment.
func (e *Entry) RetentionSince() time.Time { return time.Unix(0, e.retentionSince) }

// RetentionHeld reports whether payment.RetentionHold holds the payment.
func (e *Entry) RetentionHeld() bool { return e.retentionHeld }

// UnmarshalJSON decodes a Payment into e: the identity and the answers now,
// the rest as a digest (digest.go) until the cache's transform judges it
// (judge).
func (e *Entry) UnmarshalJSON(b []byte) error {
	var d digest
	if err := kjson.UnmarshalCaseSensitivePreserveInts(b, &d); err != nil {
		return err
	}
	*e = *EntryOf(d.payment())
	e.oddFields().whole = &d
	return nil
}

// EntryOf is what the thin cache keeps of p before it judges p for its
// options: no Wake, no index keys.
func EntryOf(p *v1alpha1.Payment) *Entry {
	e := &Entry{
		namespace:        intern(p.Namespace),
		name:             p.Name,
		provider:         intern(p.Spec.ProviderRef.Name),
		phase:            intern(string(p.Status.Phase)),
		closed:           p.Status.Closed,
		initialEventsEnd: p.Annotations[metav1.InitialEventsAnnotationKey] == "true",
		retentionHeld:    payment.RetentionHold(p) != "",
		news:             News(p),
		retentionSince:   payment.RetentionSince(p).UnixNano(),
	}
	e.SetUID(p.UID)
	e.SetResourceVersion(p.ResourceVersion)
	e.SetDeletionTimestamp(p.DeletionTimestamp.DeepCopy())
	return e
}

// oddFields are e's odd fields for a setter to write: a copy of them, as a
// copy of an Entry (an item of a List, say) shares them with the entry it
// was copied from, which a store may hold and other goroutines read.
func (e *Entry) oddFields() *oddFields {
	o := &oddFields{}
	if e.odd != nil {
		*o = *e.odd
	}
	e.odd = o
	return o
}

// dropOdd lets e's odd fields go when it has none left.
func (e *Entry) dropOdd() {
	if e.odd != nil && e.odd.empty() {
		e.odd = nil
	}
}

// judged is whole, the payment e was decoded from, if the cache's transform
// has not judged it yet.
func (e *Entry) judged() (whole *digest) {
	if e.odd == nil || e.odd.whole == nil {
		return nil
	}
	whole = e.odd.whole
	e.oddFields().whole = nil
	e.dropOdd()
	return whole
}

// addKey adds the hash of an index key, once.
func (e *Entry) addKey(h uint64) {
	if slices.Contains(e.keyHashes(), h) {
		return
	}
	if e.nkeys < inlineKeys {
		e.keys[e.nkeys] = h
		e.nkeys++
		return
	}
	o := e.oddFields()
	o.keys = slices.Clip(append(o.keys, h))
}

// keyHashes are the hashes of e's index keys (tagged).
func (e *Entry) keyHashes() []uint64 {
	if e.odd == nil || len(e.odd.keys) == 0 {
		return e.keys[:e.nkeys:e.nkeys]
	}
	return append(e.keys[:e.nkeys:e.nkeys], e.odd.keys...)
}

var apiVersion = v1alpha1.GroupVersion.String()

// seed seeds the hashes of this process: News and the index keys are only
// compared within it.
var seed = maphash.MakeSeed()

// News is a hash of what makes a change of p news to its reconciler: its
// generation (a spec change), its annotations but kubectl's copy of the
// manifest (an operator's action; an apply that changes only labels is
// none), its phase and provider id (moved by another writer), the refund
// failure it waits to read the refunded total for. A deletion is news of
// its own (Entry.Deleting). Two versions of a payment with equal News
// differ in nothing the reconciler must act on at once.
func News(p *v1alpha1.Payment) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var n [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		_, _ = h.Write(n[:])
	}
	field := func(s string) { // length first: no two lists of fields write the same bytes
		word(uint64(len(s)))
		h.WriteString(s)
	}
	word(uint64(p.Generation))
	keys := slices.Sorted(maps.Keys(p.Annotations))
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == corev1.LastAppliedConfigAnnotation })
	word(uint64(len(keys)))
	for _, k := range keys {
		field(k)
		field(p.Annotations[k])
	}
	field(string(p.Status.Phase))
	field(payment.ProviderID(p))
	if t := p.Status.RefundFailureSeenAt; t != nil {
		field(t.UTC().Format(time.RFC3339Nano))
	}
	return h.Sum64()
}

// tagged is the hash of index number i's key, with i in its low bits, so
// one slice holds every index's keys (at most tagMask+1 indexes).
func tagged(i int, key string) uint64 {
	return maphash.String(seed, key)&^tagMask | uint64(i)
}

const tagMask = 7

// has reports whether e has key in index number i.
func (e *Entry) has(i int, key string) bool { return slices.Contains(e.keyHashes(), tagged(i, key)) }

// payment is e as a Payment: its identity, provider, phase, closed mark and
// deletion; nothing else.
func (e *Entry) payment() *v1alpha1.Payment {
	return &v1alpha1.Payment{
		TypeMeta: metav1.TypeMeta{Kind: "Payment", APIVersion: apiVersion},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: e.GetNamespace(), Name: e.name, UID: e.GetUID(), ResourceVersion: e.GetResourceVersion(),
			DeletionTimestamp: e.GetDeletionTimestamp().DeepCopy(),
		},
		Spec:   v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: e.Provider()}},
		Status: v1alpha1.PaymentStatus{Phase: e.Phase(), Closed: e.closed},
	}
}

// GetObjectKind implements runtime.Object: an Entry is always a Payment of
// v1alpha1 and keeps no type fields (the decoder's copy of them would cost
// each entry two strings).
func (e *Entry) GetObjectKind() schema.ObjectKind { return entryKind{} }

type entryKind struct{}

func (entryKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (entryKind) GroupVersionKind() schema.GroupVersionKind {
	return v1alpha1.GroupVersion.WithKind("Payment")
}

// uuid is uid's 16 bytes when it is a UUID as the API server writes them
// (lowercase; a string of one costs an entry 64 bytes more), and false when
// it is anything else, the zero UUID included.
func uuid(uid types.UID) (b [16]byte, ok bool) {
	if len(uid) != 36 {
		return b, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if uid[i] != '-' {
				return b, false
			}
			i++
			continue
		}
		hi, ok1 := unhex(uid[i])
		lo, ok2 := unhex(uid[i+1])
		if !ok1 || !ok2 {
			return b, false
		}
		b[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return b, b != [16]byte{} // the zero bytes read back as no UUID
}

// unhex is the value of a lowercase hex digit (how the API server writes
// UIDs; any other spelling is kept as given).
func unhex(b byte) (byte, bool) {
	switch {
	case '0' <= b && b <= '9':
		return b - '0', true
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10, true
	}
	return 0, false
}

// uuidString is b as the API server writes a UUID.
func uuidString(b [16]byte) types.UID {
	const digits = "0123456789abcdef"
	var out [36]byte
	j := 0
	for i, v := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = digits[v>>4], digits[v&15]
		j += 2
	}
	return types.UID(out[:])
}

// DeepCopyObject implements runtime.Object.
func (e *Entry) DeepCopyObject() runtime.Object {
	c := *e
	if e.odd != nil {
		o := *e.odd
		o.deletion, o.keys = o.deletion.DeepCopy(), slices.Clone(o.keys)
		c.odd = &o
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *EntryList) DeepCopyObject() runtime.Object {
	c := &EntryList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	if l.Items != nil {
		c.Items = make([]Entry, len(l.Items))
		for i := range l.Items {
			c.Items[i] = *l.Items[i].DeepCopyObject().(*Entry)
		}
	}
	return c
}

// metav1.Object: the fields an Entry keeps; the others read empty and are
// not kept when set. Of the annotations it keeps only the mark of the
// bookmark that ends a watch's initial events, which the reflector waits
// for.

func (e *Entry) GetNamespace() string    { return e.namespace.String() }
func (e *Entry) SetNamespace(ns string)  { e.namespace = intern(ns) }
func (e *Entry) GetName() string         { return e.name }
func (e *Entry) SetName(name string)     { e.name = name }
func (e *Entry) GetGenerateName() string { return "" }
func (e *Entry) SetGenerateName(string)  {}
func (e *Entry) GetUID() types.UID {
	if e.uid != [16]byte{} {
		return uuidString(e.uid)
	}
	if e.odd != nil {
		return e.odd.uid
	}
	return ""
}
func (e *Entry) SetUID(uid types.UID) {
	e.uid = [16]byte{}
	if b, ok := uuid(uid); ok {
		e.uid, uid = b, ""
	}
	if uid != "" || e.odd != nil {
		e.oddFields().uid = uid
		e.dropOdd()
	}
}

// GetResourceVersion: a decimal resourceVersion (as the API server writes
// them) is kept as a number.
func (e *Entry) GetResourceVersion() string {
	if e.rv != 0 {
		return strconv.FormatUint(e.rv-1, 10)
	}
	if e.odd != nil {
		return e.odd.resourceVersion
	}
	return ""
}
func (e *Entry) SetResourceVersion(v string) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err == nil && n < math.MaxUint64 && strconv.FormatUint(n, 10) == v {
		e.rv, v = n+1, ""
	} else {
		e.rv = 0
	}
	if v != "" || e.odd != nil {
		e.oddFields().resourceVersion = v
		e.dropOdd()
	}
}
func (e *Entry) GetGeneration() int64              { return 0 }
func (e *Entry) SetGeneration(int64)               {}
func (e *Entry) GetSelfLink() string               { return "" }
func (e *Entry) SetSelfLink(string)                {}
func (e *Entry) GetCreationTimestamp() metav1.Time { return metav1.Time{} }
func (e *Entry) SetCreationTimestamp(metav1.Time)  {}
func (e *Entry) GetDeletionTimestamp() *metav1.Time {
	if e.odd == nil {
		return nil
	}
	return e.odd.deletion
}
func (e *Entry) SetDeletionTimestamp(t *metav1.Time) {
	if t != nil || e.odd != nil {
		e.oddFields().deletion = t
		e.dropOdd()
	}
}
func (e *Entry) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (e *Entry) SetDeletionGracePeriodSeconds(*int64)  {}
func (e *Entry) GetLabels() map[string]string          { return nil }
func (e *Entry) SetLabels(map[string]string)           {}
func (e *Entry) GetAnnotations() map[string]string {
	if e.initialEventsEnd {
		return map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return nil
}
func (e *Entry) SetAnnotations(a map[string]string) {
	e.initialEventsEnd = a[metav1.InitialEventsAnnotationKey] == "true"
}
func (e *Entry) GetFinalizers() []string { return nil }
func (e *Entry) SetFinalizers([]string)  {}
func (e *Entry) GetOwnerReferences() []metav1.OwnerReference {
	return nil
}
func (e *Entry) SetOwnerReferences([]metav1.OwnerReference)    {}
func (e *Entry) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (e *Entry) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
