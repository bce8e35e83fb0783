package payment

import (
	"encoding/json"
	"fmt"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// A Refund's first marker (the status decided before its refund call:
// amount, key, request time) is written in the patch that holds the Refund
// (money-in-flight finalizer, money-uid, owner), as the annotation
// v1alpha1.AnnotationRefundMarker, instead of in a status write of its own:
// a refund costs one API write less. The status gets the marker with the
// call's answer. Until then the annotation stands for the status, and every
// reader of Refunds folds it in (FoldRefundMarker): the refund controller,
// its siblings deciding how much they may take, the payment's reconcile, the
// inbox, the console.

// RefundMarkerAnnotation renders the marker status st for the annotation.
func RefundMarkerAnnotation(st v1alpha1.RefundStatus) (string, error) {
	if st.CreateRequestedAt == nil {
		return "", fmt.Errorf("refund marker without createRequestedAt")
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode refund marker: %w", err)
	}
	return string(b), nil
}

// RefundMarker is the marker rf's annotation holds, when it stands for rf's
// status: the status has no marker, no refund id, no adopted outcome and is
// not final (the answer's write, or any write after the patch, carries the
// marker into the status), and the annotation was written for rf itself
// (its money-uid is rf's UID: a copy restored from another object's
// metadata never takes that object's marker for its own, and is parked as
// restored instead). An annotation that cannot be read stands for nothing.
func RefundMarker(rf *v1alpha1.Refund) (v1alpha1.RefundStatus, bool) {
	st := &rf.Status
	if st.CreateRequestedAt != nil || st.ProviderRefundID != "" || st.AdoptedAt != nil || st.Phase.IsFinal() {
		return v1alpha1.RefundStatus{}, false
	}
	a := rf.Annotations
	raw, ok := a[v1alpha1.AnnotationRefundMarker]
	if !ok || a[v1alpha1.AnnotationMoneyUID] != string(rf.UID) || rf.UID == "" {
		return v1alpha1.RefundStatus{}, false
	}
	var m v1alpha1.RefundStatus
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.CreateRequestedAt == nil {
		return v1alpha1.RefundStatus{}, false
	}
	return m, true
}

// FoldRefundMarker makes rf's status the marker of its annotation when that
// stands for it (RefundMarker), and reports whether it did.
func FoldRefundMarker(rf *v1alpha1.Refund) bool {
	m, ok := RefundMarker(rf)
	if ok {
		rf.Status = m
	}
	return ok
}
