package plugin

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/payment"
)

// candidateUID stands for the Refund not created yet among its payment's
// Refunds while its allowance is decided.
const candidateUID = "kubectl-paywarden-candidate"

// PlanRefund builds the Refund of p that refund creates (named
// "<payment>-<random>" by the API server) and decides it with the manager's
// rule (payment.RefundAllowance) over the payment's other Refunds: what the
// manager would refuse is refused before anything is created. note says why
// the manager will let it wait, if it will.
func PlanRefund(p *v1alpha1.Payment, siblings []v1alpha1.Refund, amountText string, all bool, reason string, now time.Time) (rf *v1alpha1.Refund, describe, note string, err error) {
	rf = &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, GenerateName: p.Name + "-"},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: p.Name}, Reason: reason},
	}
	switch {
	case all == (amountText != ""):
		return nil, "", "", refused("refund", "give either --amount (in %s major units) or --all (everything still refundable)", p.Spec.Amount.Currency)
	case amountText != "":
		minor, err := currency.ParseMajor(amountText, p.Spec.Amount.Currency)
		if err != nil {
			return nil, "", "", refused("refund", "--amount: %v", err)
		}
		rf.Spec.Amount = &v1alpha1.Amount{Value: minor, Currency: p.Spec.Amount.Currency}
	}
	// The candidate is counted after every Refund there is, as the manager
	// will count it once created.
	candidate := rf.DeepCopy()
	candidate.UID = candidateUID
	created := now
	for _, s := range siblings {
		if t := s.CreationTimestamp.Time; !t.Before(created) {
			created = t.Add(time.Second)
		}
	}
	candidate.CreationTimestamp = metav1.NewTime(created)
	amount, waitFor, refusal := payment.RefundAllowance(candidate, p, siblings)
	if refusal != "" {
		return nil, "", "", refused("refund", "%s", refusal)
	}
	describe = "refund of everything still refundable"
	switch {
	case amount.Value > 0:
		describe = "refund of " + v1alpha1.FormatAmount(amount.Value, amount.Currency)
	case rf.Spec.Amount != nil:
		describe = "refund of " + v1alpha1.FormatAmount(rf.Spec.Amount.Value, rf.Spec.Amount.Currency)
	}
	if waitFor != "" {
		note = "the refund waits (" + waitFor + ") before the manager decides it"
	}
	return rf, describe, note, nil
}

// CheckRefund says how far a Refund got: done in Succeeded, Failed, or
// Unknown (a human's).
func CheckRefund(rf *v1alpha1.Refund) Progress {
	st := &rf.Status
	switch st.Phase {
	case v1alpha1.RefundSucceeded:
		s := fmt.Sprintf("refunded: refund %s is Succeeded, %s", rf.Name, st.AmountDisplay)
		if st.ProviderRefundID != "" {
			s += " (provider refund id " + st.ProviderRefundID + ")"
		}
		return Progress{Done: true, Text: s}
	case v1alpha1.RefundFailed:
		s := fmt.Sprintf("refund %s Failed", rf.Name)
		if f := st.Failure; f != nil {
			s += ": " + f.Code + ": " + f.Message
		}
		return Progress{Done: true, Failed: true, Text: s}
	case v1alpha1.RefundUnknown:
		s := fmt.Sprintf("refund %s is Unknown and needs a human (docs/runbook-refund-unknown.md)", rf.Name)
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil {
			s += ": " + c.Reason + ": " + c.Message
		}
		return Progress{Done: true, Failed: true, Text: s}
	}
	s := fmt.Sprintf("refund %s is %s", rf.Name, refundPhase(rf))
	if e := st.Query.LastError; e != "" {
		s += "; last error: " + e
	}
	return Progress{Text: s}
}
