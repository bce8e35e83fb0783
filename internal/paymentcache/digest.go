package paymentcache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// digest is what the thin cache decodes a Payment into before it judges it
// (Entry): the fields the cache's answers and indexes read, under the
// Payment's own JSON names. Everything else in the API server's answer is
// skipped while decoding, managed fields included.
type digest struct {
	Metadata digestMeta   `json:"metadata,omitempty"`
	Spec     digestSpec   `json:"spec"`
	Status   digestStatus `json:"status,omitempty"`
}

type digestMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               types.UID         `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp metav1.Time       `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
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

// payment is d as a Payment: the fields the digest decodes, the rest empty.
func (d *digest) payment() *v1alpha1.Payment {
	m := &d.Metadata
	p := &v1alpha1.Payment{
		TypeMeta: metav1.TypeMeta{Kind: "Payment", APIVersion: apiVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
			CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, Annotations: m.Annotations, Finalizers: m.Finalizers,
		},
	}
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
