package paymentcache

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	kjson "sigs.k8s.io/json"
	"slices"
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
	namespace, name string
	uid             compactUID
	resourceVersion string
	deletion        *metav1.Time
	provider        string
	phase           v1alpha1.PaymentPhase
	closed, wake    bool
	retentionHeld   bool
	// initialEventsEnd marks the bookmark that ends a watch's initial
	// events (its only annotation the reflector reads).
	initialEventsEnd bool
	news             uint64
	retentionSince   int64
	// keys are the hashes of the payment's index keys, each tagged with its
	// index (tagged).
	keys []uint64
	// whole is the payment as decoded, until the transform judges it.
	whole *digest
}

// EntryList is a list of Entries.
type EntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Entry `json:"items"`
}

// Provider is the name of the payment's provider (spec.providerRef).
func (e *Entry) Provider() string { return e.provider }

// Phase is the payment's phase.
func (e *Entry) Phase() v1alpha1.PaymentPhase { return e.phase }

// Closed reports status.closed.
func (e *Entry) Closed() bool { return e.closed }

// Deleting reports whether the payment is being deleted.
func (e *Entry) Deleting() bool { return e.deletion != nil }

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
	e.whole = &d

	return nil
}

// EntryOf is what the thin cache keeps of p before it judges p for its
// options: no Wake, no index keys.
func EntryOf(p *v1alpha1.Payment) *Entry {
	e := &Entry{
		namespace:        intern(p.Namespace),
		name:             p.Name,
		uid:              compact(p.UID),
		resourceVersion:  p.ResourceVersion,
		deletion:         p.DeletionTimestamp.DeepCopy(),
		provider:         intern(p.Spec.ProviderRef.Name),
		phase:            v1alpha1.PaymentPhase(intern(string(p.Status.Phase))),
		closed:           p.Status.Closed,
		initialEventsEnd: p.Annotations[metav1.InitialEventsAnnotationKey] == "true",
		retentionHeld:    payment.RetentionHold(p) != "",
		news:             News(p),
		retentionSince:   payment.RetentionSince(p).UnixNano(),
	}
	return e
}

var apiVersion = v1alpha1.GroupVersion.String()

// intern is s, one copy for every payment that has it (namespaces,
// providers, phases).
func intern(s string) string { return unique.Make(s).Value() }

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
func (e *Entry) has(i int, key string) bool { return slices.Contains(e.keys, tagged(i, key)) }

// payment is e as a Payment: its identity, provider, phase, closed mark and
// deletion; nothing else.
func (e *Entry) payment() *v1alpha1.Payment {
	return &v1alpha1.Payment{
		TypeMeta: metav1.TypeMeta{Kind: "Payment", APIVersion: apiVersion},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: e.namespace, Name: e.name, UID: e.uid.get(), ResourceVersion: e.resourceVersion,
			DeletionTimestamp: e.deletion.DeepCopy(),
		},
		Spec:   v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: e.provider}},
		Status: v1alpha1.PaymentStatus{Phase: e.phase, Closed: e.closed},
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

// compactUID is a UID kept in 16 bytes when it is a UUID, as the API server
// makes them (a string of one costs 64 bytes more), else as given.
type compactUID struct {
	uuid  [16]byte
	other types.UID
}

func compact(uid types.UID) compactUID {
	var c compactUID
	if len(uid) != 36 {
		return compactUID{other: uid}
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if uid[i] != '-' {
				return compactUID{other: uid}
			}
			i++
			continue
		}
		hi, ok1 := unhex(uid[i])
		lo, ok2 := unhex(uid[i+1])
		if !ok1 || !ok2 {
			return compactUID{other: uid}
		}
		c.uuid[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	if c.uuid == [16]byte{} { // read back as the empty UID otherwise
		return compactUID{other: uid}
	}
	return c
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

func (c compactUID) get() types.UID {
	if c.uuid == [16]byte{} {
		return c.other
	}
	const digits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, v := range c.uuid {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = digits[v>>4], digits[v&15]
		j += 2
	}
	return types.UID(b[:])
}

// DeepCopyObject implements runtime.Object.
func (e *Entry) DeepCopyObject() runtime.Object {
	c := *e
	c.deletion = e.deletion.DeepCopy()
	c.keys = slices.Clone(e.keys)
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

func (e *Entry) GetNamespace() string    { return e.namespace }
func (e *Entry) SetNamespace(ns string)  { e.namespace = intern(ns) }
func (e *Entry) GetName() string         { return e.name }
func (e *Entry) SetName(name string)     { e.name = name }
func (e *Entry) GetGenerateName() string { return "" }
func (e *Entry) SetGenerateName(string)  {}
func (e *Entry) GetUID() types.UID       { return e.uid.get() }
func (e *Entry) SetUID(uid types.UID)    { e.uid = compact(uid) }
func (e *Entry) GetResourceVersion() string {
	return e.resourceVersion
}
func (e *Entry) SetResourceVersion(v string)           { e.resourceVersion = v }
func (e *Entry) GetGeneration() int64                  { return 0 }
func (e *Entry) SetGeneration(int64)                   {}
func (e *Entry) GetSelfLink() string                   { return "" }
func (e *Entry) SetSelfLink(string)                    {}
func (e *Entry) GetCreationTimestamp() metav1.Time     { return metav1.Time{} }
func (e *Entry) SetCreationTimestamp(metav1.Time)      {}
func (e *Entry) GetDeletionTimestamp() *metav1.Time    { return e.deletion }
func (e *Entry) SetDeletionTimestamp(t *metav1.Time)   { e.deletion = t }
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
