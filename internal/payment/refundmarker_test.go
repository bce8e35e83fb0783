package payment_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// markedInAnnotation is a Refund of 5.00 whose marker was written in the
// patch that held it (the annotation, with its own money-uid), its status
// still as before the marker; it returns the marker status too.
func markedInAnnotation(t *testing.T) (*v1alpha1.Refund, v1alpha1.RefundStatus) {
	t.Helper()
	marked := newRefundMarked(testPolicy(), payment.RefundFacts{Payment: paidPayment(0)})
	if marked.Status.CreateRequestedAt == nil {
		t.Fatalf("no marker planned: %+v", marked.Status)
	}
	v, err := payment.RefundMarkerAnnotation(marked.Status)
	if err != nil {
		t.Fatal(err)
	}
	rf := newRefund("m", 500, t0)
	rf.Annotations = map[string]string{v1alpha1.AnnotationRefundMarker: v, v1alpha1.AnnotationMoneyUID: string(rf.UID)}
	return rf, marked.Status
}

// A marker written in the Refund's annotation stands for its status until
// the status has one: folded in, the Refund plans exactly what the same
// marker in its status plans (the refund call with the marker's key and
// amount, never a second decision of how much it may take).
func TestRefundMarkerInTheAnnotationStandsForTheStatus(t *testing.T) {
	rf, want := markedInAnnotation(t)
	if !payment.FoldRefundMarker(rf) || !equality.Semantic.DeepEqual(rf.Status, want) {
		t.Fatalf("folded status %+v, want the marker %+v", rf.Status, want)
	}
	inStatus := newRefund("m", 500, t0)
	inStatus.Status = want
	pol, facts := testPolicy(), payment.RefundFacts{Payment: paidPayment(0)}
	now := t0.Add(time.Second)
	got, exp := payment.PlanRefund(rf, pol, facts, now), payment.PlanRefund(inStatus, pol, facts, now)
	if got.Action != payment.Create || exp.Action != payment.Create {
		t.Fatalf("planned %s (annotation) and %s (status), want the refund call", got.Action, exp.Action)
	}
	if k1, k2 := payment.RefundCallKey(paidPayment(0), rf), payment.RefundCallKey(paidPayment(0), inStatus); k1 != k2 || k1 != want.IdempotencyKey {
		t.Errorf("call keys %q and %q, want the marker's %q", k1, k2, want.IdempotencyKey)
	}
	// A sibling deciding how much it may take counts the folded marker's
	// amount as taken: 15.00 more of a 19.99 payment is refused.
	sib := newRefund("other", 1500, t0)
	amount, waitFor, refusal := payment.RefundAllowance(sib, paidPayment(0), []v1alpha1.Refund{*rf})
	if refusal == "" && waitFor == "" {
		t.Errorf("a sibling was allowed %+v beside the folded marker of 5.00 on a 19.99 payment", amount)
	}
}

// What the annotation never stands for.
func TestRefundMarkerIsNotFolded(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(rf *v1alpha1.Refund)
	}{
		{"a copy restored from another object's metadata (another money-uid)", func(rf *v1alpha1.Refund) {
			rf.Annotations[v1alpha1.AnnotationMoneyUID] = "uid-of-the-deleted-original"
		}},
		{"a Refund without a money-uid", func(rf *v1alpha1.Refund) { delete(rf.Annotations, v1alpha1.AnnotationMoneyUID) }},
		{"a status with the marker already (the answer's write)", func(rf *v1alpha1.Refund) {
			rf.Status.CreateRequestedAt = ptrTime(t0.Add(time.Hour))
		}},
		{"a status with the provider's refund id", func(rf *v1alpha1.Refund) { rf.Status.ProviderRefundID = "re_1" }},
		{"a status that adopted the ledger's outcome", func(rf *v1alpha1.Refund) { rf.Status.AdoptedAt = ptrTime(t0) }},
		{"a final status", func(rf *v1alpha1.Refund) { rf.Status.Phase = v1alpha1.RefundFailed }},
		{"an annotation that cannot be read", func(rf *v1alpha1.Refund) { rf.Annotations[v1alpha1.AnnotationRefundMarker] = "{not json" }},
		{"an annotation without a request time", func(rf *v1alpha1.Refund) { rf.Annotations[v1alpha1.AnnotationRefundMarker] = `{"phase":"Pending"}` }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rf, _ := markedInAnnotation(t)
			tt.change(rf)
			before := rf.Status.DeepCopy()
			if payment.FoldRefundMarker(rf) || !equality.Semantic.DeepEqual(&rf.Status, before) {
				t.Errorf("folded: status %+v, want it unchanged", rf.Status)
			}
		})
	}
	if _, err := payment.RefundMarkerAnnotation(v1alpha1.RefundStatus{Phase: v1alpha1.RefundPending}); err == nil {
		t.Error("a marker without a request time was rendered")
	}
}

// A copy restored from a Refund that sent its refund, annotations and all
// (its marker among them), never takes that marker for its own: it is
// parked as restored, and nothing is sent.
func TestRestoredCopyWithAMarkerAnnotationIsParked(t *testing.T) {
	rf, _ := markedInAnnotation(t)
	rf.Annotations[v1alpha1.AnnotationMoneyUID] = "uid-of-the-deleted-original"
	payment.FoldRefundMarker(rf)
	s := payment.PlanRefund(rf, testPolicy(), payment.RefundFacts{Payment: paidPayment(0)}, t0.Add(time.Second))
	if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.RefundUnknown || s.Outcome.Status.CreateRequestedAt != nil {
		t.Errorf("planned %s %+v, want the copy parked Unknown without a marker", s.Action, s.Outcome.Status)
	}
}
