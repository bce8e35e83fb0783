package paymentcache

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// digest is what the thin cache decodes a Payment into: the fields that
// find it, judge it for retention and the gauges, and wake it, under the
// Payment's own JSON names. Everything else in the API server's answer is
// skipped while decoding, so the cache never holds a whole Payment, not
// even while it lists them at start. Readers get a *v1alpha1.Payment with
// these fields set (payment).
type digest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              digestSpec   `json:"spec"`
	Status            digestStatus `json:"status,omitempty"`
}

type digestSpec struct {
	ProviderRef       v1alpha1.LocalObjectReference `json:"providerRef"`
	MerchantReference string                        `json:"merchantReference,omitempty"`
	IdempotencyKey    string                        `json:"idempotencyKey,omitempty"`
	ProviderPaymentID string                        `json:"providerPaymentID,omitempty"`
}

type digestStatus struct {
	Phase               v1alpha1.PaymentPhase   `json:"phase,omitempty"`
	ProviderPaymentID   string                  `json:"providerPaymentID,omitempty"`
	CheckoutID          string                  `json:"checkoutID,omitempty"`
	Query               digestQuery             `json:"query,omitempty"`
	RefundFailureSeenAt *metav1.Time            `json:"refundFailureSeenAt,omitempty"`
	History             []v1alpha1.HistoryEntry `json:"history,omitempty"`
	Actions             v1alpha1.ActionStatus   `json:"actions,omitempty"`
	Conditions          []metav1.Condition      `json:"conditions,omitempty"`
	AdoptedAt           *metav1.Time            `json:"adoptedAt,omitempty"`
	Closed              bool                    `json:"closed,omitempty"`
}

type digestQuery struct {
	NextTime *metav1.MicroTime `json:"nextTime,omitempty"`
}

// digestList is a list of digests.
type digestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []digest `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (d *digest) DeepCopyObject() runtime.Object {
	c := *d
	d.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Status.RefundFailureSeenAt = d.Status.RefundFailureSeenAt.DeepCopy()
	c.Status.AdoptedAt = d.Status.AdoptedAt.DeepCopy()
	c.Status.Query.NextTime = d.Status.Query.NextTime.DeepCopy()
	if d.Status.History != nil {
		c.Status.History = make([]v1alpha1.HistoryEntry, len(d.Status.History))
		for i := range d.Status.History {
			d.Status.History[i].DeepCopyInto(&c.Status.History[i])
		}
	}
	if d.Status.Conditions != nil {
		c.Status.Conditions = make([]metav1.Condition, len(d.Status.Conditions))
		for i := range d.Status.Conditions {
			d.Status.Conditions[i].DeepCopyInto(&c.Status.Conditions[i])
		}
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *digestList) DeepCopyObject() runtime.Object {
	c := &digestList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	if l.Items != nil {
		c.Items = make([]digest, len(l.Items))
		for i := range l.Items {
			c.Items[i] = *l.Items[i].DeepCopyObject().(*digest)
		}
	}
	return c
}

// trim drops what the thin cache does not keep even of the fields it
// decodes: kubectl's copy of the manifest, every history entry but the last
// (retention counts from it), the conditions' messages.
func trim(obj any) (any, error) {
	d, ok := obj.(*digest)
	if !ok {
		return obj, nil
	}
	d.ManagedFields = nil
	if _, ok := d.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		delete(d.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	if n := len(d.Status.History); n > 1 {
		d.Status.History = []v1alpha1.HistoryEntry{d.Status.History[n-1]}
	}
	if n := len(d.Status.History); n == 1 {
		h := &d.Status.History[0]
		d.Status.History[0] = v1alpha1.HistoryEntry{Time: h.Time, To: h.To}
	}
	for i := range d.Status.Conditions {
		d.Status.Conditions[i].Message = ""
	}
	return d, nil
}

// payment is d as a Payment: the fields the digest keeps, the rest empty.
func (d *digest) payment() *v1alpha1.Payment {
	p := &v1alpha1.Payment{TypeMeta: metav1.TypeMeta{Kind: "Payment", APIVersion: v1alpha1.GroupVersion.String()}, ObjectMeta: d.ObjectMeta}
	p.Spec = v1alpha1.PaymentSpec{
		ProviderRef: d.Spec.ProviderRef, MerchantReference: d.Spec.MerchantReference,
		IdempotencyKey: d.Spec.IdempotencyKey, ProviderPaymentID: d.Spec.ProviderPaymentID,
	}
	st := &d.Status
	p.Status = v1alpha1.PaymentStatus{
		Phase: st.Phase, ProviderPaymentID: st.ProviderPaymentID, CheckoutID: st.CheckoutID,
		Query:               v1alpha1.QueryStatus{NextTime: st.Query.NextTime},
		RefundFailureSeenAt: st.RefundFailureSeenAt, History: st.History, Actions: st.Actions,
		Conditions: st.Conditions, AdoptedAt: st.AdoptedAt, Closed: st.Closed,
	}
	return p
}

// asPayment is the Payment a thin-cache object stands for.
func asPayment(obj any) (*v1alpha1.Payment, bool) {
	switch o := obj.(type) {
	case *digest:
		return o.payment(), true
	case *v1alpha1.Payment:
		return o, true
	}
	return nil, false
}

// Thin is what the thin cache keeps of p, as a Payment: p decoded as the
// cache decodes it, and trimmed.
func Thin(p *v1alpha1.Payment) (*v1alpha1.Payment, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var d digest
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decode a payment as the thin cache does: %w", err)
	}
	if _, err := trim(&d); err != nil {
		return nil, err
	}
	return d.payment(), nil
}
