package payment

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// The transition tables are what the state machines can do, found by running
// them, never written down beside them: a table copied by hand is a second
// place for the rules, and the two drift apart. A checker (the chaos soak
// checks every history step it finds) takes the table from here.
//
// Exploring: every phase, with the status the other writers leave around it
// (a payer's approval, a capture asked for, a local close-out, a review, a
// refunded total, a recorded provider id), meets every kind of observation
// from every kind of channel; every status Apply returns is explored in turn
// until nothing new turns up. A step is a history entry Apply appended, so a
// step that keeps the phase (a conflict, a dispute, a larger refund) is
// listed as from -> from.

// AllowedTransitions is the payment state machine's transition table: for
// each phase (the empty phase of a payment nobody has decided on included),
// the phases a history step from it may end in.
func AllowedTransitions() map[v1alpha1.PaymentPhase][]v1alpha1.PaymentPhase {
	steps := stepSet[v1alpha1.PaymentPhase]{}
	seen := map[string]bool{}
	var queue []*v1alpha1.Payment
	var push func(p *v1alpha1.Payment)
	push = func(p *v1alpha1.Payment) {
		if k := exploreKey(p); !seen[k] {
			seen[k] = true
			queue = append(queue, p)
			for _, x := range asked(p) {
				push(x)
			}
		}
	}
	for _, p := range paymentSeeds() {
		push(p)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, o := range paymentObservations(p) {
			res := Apply(p, o, exploreNow)
			for _, h := range res.Status.History[len(p.Status.History):] {
				steps.add(h.From, h.To)
			}
			next := p.DeepCopy()
			next.Status = res.Status
			next.Status.History, next.Status.HistoryDropped = nil, 0
			next.Status.RecentEventIDs, next.Status.LastEvent = nil, nil
			// A dispute only stops the next dispute from being recorded: the
			// payment without it makes every step the disputed one makes.
			meta.RemoveStatusCondition(&next.Status.Conditions, v1alpha1.ConditionDisputed)
			push(next)
		}
	}
	return steps.table()
}

// AllowedRefundTransitions is the Refund state machine's transition table,
// found the same way (ApplyRefund over every phase and observation).
func AllowedRefundTransitions() map[v1alpha1.RefundPhase][]v1alpha1.RefundPhase {
	steps := stepSet[v1alpha1.RefundPhase]{}
	seen := map[string]bool{}
	var queue []*v1alpha1.Refund
	push := func(r *v1alpha1.Refund) {
		if k := exploreRefundKey(r); !seen[k] {
			seen[k] = true
			queue = append(queue, r)
		}
	}
	for _, r := range refundSeeds() {
		push(r)
	}
	obs := refundObservations()
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, o := range obs {
			res := ApplyRefund(r, o, exploreNow)
			for _, h := range res.Status.History[len(r.Status.History):] {
				steps.add(v1alpha1.RefundPhase(h.From), v1alpha1.RefundPhase(h.To))
			}
			next := r.DeepCopy()
			next.Status = res.Status
			next.Status.History, next.Status.HistoryDropped = nil, 0
			next.Status.RecentEventIDs, next.Status.LastEvent = nil, nil
			push(next)
		}
	}
	return steps.table()
}

// stepSet is the history steps an exploration found: from -> to.
type stepSet[P ~string] map[P]map[P]bool

func (s stepSet[P]) add(from, to P) {
	if s[from] == nil {
		s[from] = map[P]bool{}
	}
	s[from][to] = true
}

// table is the transition table of the steps: for each phase, the phases a
// step from it ends in, sorted.
func (s stepSet[P]) table() map[P][]P {
	out := map[P][]P{}
	for from, tos := range s {
		for to := range tos {
			out[from] = append(out[from], to)
		}
		slices.Sort(out[from])
	}
	return out
}

// exploreNow is the explorations' clock: Apply takes time as an argument and
// no rule of a phase change depends on it.
var exploreNow = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// The explorations' amounts: the payment's, a part of it (a partial
// capture or refund) and one the provider should not report.
const (
	exploreAmount  = 1000
	explorePart    = 400
	exploreWrong   = 999
	exploreCur     = "USD"
	exploreID      = "pay_1"
	exploreOtherID = "pay_2"
	exploreRefund  = "re_1"
)

func exploreMoney(v int64) *v1alpha1.Money { return &v1alpha1.Money{Value: v, Currency: exploreCur} }

// paymentSeeds is a new payment; Apply and asked (the capture below) take
// it everywhere else. How it is captured does not change what Apply decides.
func paymentSeeds() []*v1alpha1.Payment {
	return []*v1alpha1.Payment{{Spec: v1alpha1.PaymentSpec{Amount: v1alpha1.Amount{Value: exploreAmount, Currency: exploreCur}}}}
}

// asked is what the operation code, the one writer of a payment's status
// besides Apply that changes what Apply decides, leaves on a payment it is
// asked to capture: the amount to capture (all of it, or a part), with the
// operation in progress.
func asked(p *v1alpha1.Payment) []*v1alpha1.Payment {
	st := &p.Status
	if st.Phase.IsFinal() || st.AmountToCapture != nil || (st.Phase != v1alpha1.PhaseAuthorized && !st.PayerApproved) {
		return nil
	}
	var out []*v1alpha1.Payment
	for _, amount := range []int64{exploreAmount, explorePart} {
		x := p.DeepCopy()
		x.Status.AmountToCapture = exploreMoney(amount)
		x.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCapture, RequestedAt: metav1.NewTime(exploreNow)}
		out = append(out, x)
	}
	return out
}

// paymentObservations are every kind of observation a payment in p's state
// can meet without an operator: each normalized status, about the payment's
// own provider id, no id or another one, with the amounts, failures,
// refunded totals, reviews and close-outs that change what it means. The
// channel makes no difference to a phase change (an event's id only
// deduplicates), so one channel stands for all.
func paymentObservations(p *v1alpha1.Payment) []Observation {
	// A payment with no provider id yet takes the first one it hears of;
	// one with an id tells its own from another's.
	ids := []string{"", exploreID}
	if own := p.Status.ProviderPaymentID; own != "" {
		ids = []string{own, exploreOtherID}
	}
	var out []Observation
	add := func(o Observation) {
		for _, id := range ids {
			x := o
			x.Source, x.ProviderPaymentID = v1alpha1.SourceStatusQuery, id
			out = append(out, x)
		}
	}
	failure := &v1alpha1.Failure{Code: "card_declined"}
	for _, f := range []*v1alpha1.Failure{nil, failure} {
		for _, pastExpiry := range []bool{false, true} {
			add(Observation{Observed: ObservedPending, Failure: f, PastExpiry: pastExpiry})
		}
		add(Observation{Observed: ObservedProcessing, Failure: f})
		for _, o := range []Observed{ObservedFailed, ObservedExpired, ObservedCanceled} {
			add(Observation{Observed: o, Failure: f})
		}
	}
	add(Observation{Observed: ObservedExpired, Local: true})
	for _, a := range []*v1alpha1.Money{nil, exploreMoney(exploreAmount), exploreMoney(explorePart), exploreMoney(exploreWrong)} {
		add(Observation{Observed: ObservedSucceeded, Amount: a})
		add(Observation{Observed: ObservedAuthorized, Amount: a})
	}
	for _, total := range []int64{0, explorePart, exploreAmount} {
		for _, lowers := range []bool{false, true} {
			add(Observation{Observed: ObservedRefund, RefundedTotal: exploreMoney(total), Lowers: lowers})
		}
	}
	add(Observation{Observed: ObservedRefund, RefundedTotal: &v1alpha1.Money{Value: explorePart, Currency: "EUR"}})
	add(Observation{Observed: ObservedDispute})
	add(Observation{Observed: ObservedApproved})
	for _, review := range []string{"", v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonCreateOutcomeUnknown} {
		add(Observation{Observed: ObservedUnknown, Review: review})
	}
	return out
}

// exploreKey is what an explored payment status is told apart by: what
// Apply's rules read, not its bookkeeping (history, event ids, times).
func exploreKey(p *v1alpha1.Payment) string {
	st := &p.Status
	disputed := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDisputed)
	return fmt.Sprintf("%s|%v|%v|%v|%s|%s|%s|%s|%s", st.Phase, st.PayerApproved, st.ExpiredLocally, disputed,
		reviewReason(st.Conditions), moneyKey(st.AmountToCapture), moneyKey(st.AmountRefunded), moneyKey(st.AmountReceived), st.ProviderPaymentID+"/"+st.CheckoutID)
}

func moneyKey(m *v1alpha1.Money) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%d%s", m.Value, m.Currency)
}

// refundSeeds are new Refunds, with an amount asked for or not; ApplyRefund
// takes them everywhere else.
func refundSeeds() []*v1alpha1.Refund {
	var out []*v1alpha1.Refund
	for _, amount := range []bool{false, true} {
		r := &v1alpha1.Refund{}
		r.Namespace, r.Name, r.UID = "ns", "r1", "uid-1"
		if amount {
			r.Status.Amount = exploreMoney(explorePart)
		}
		out = append(out, r)
	}
	return out
}

// refundObservations are every kind of refund observation without an
// operator: about this Refund's refund, another refund or none named (by
// provider id and by reference), with and without the amount.
func refundObservations() []Observation {
	var out []Observation
	add := func(o Observation) {
		for _, id := range []string{"", exploreRefund, "re_2"} {
			for _, ref := range []string{"", "ns/r1/uid-1", "ns/r1/uid-0"} {
				x := o
				x.Source, x.ProviderRefundID, x.RefundReference = v1alpha1.SourceStatusQuery, id, ref
				out = append(out, x)
			}
		}
	}
	failure := &v1alpha1.Failure{Code: "declined"}
	for _, o := range []Observed{ObservedPending, ObservedProcessing} {
		add(Observation{Observed: o})
	}
	for _, a := range []*v1alpha1.Money{nil, exploreMoney(explorePart), exploreMoney(exploreWrong)} {
		add(Observation{Observed: ObservedSucceeded, Amount: a})
	}
	for _, f := range []*v1alpha1.Failure{nil, failure} {
		add(Observation{Observed: ObservedFailed, Failure: f})
	}
	for _, review := range []string{"", v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonCreateOutcomeUnknown} {
		add(Observation{Observed: ObservedUnknown, Review: review})
	}
	return out
}

func exploreRefundKey(r *v1alpha1.Refund) string {
	st := &r.Status
	return fmt.Sprintf("%s|%s|%s|%s", st.Phase, reviewReason(st.Conditions), moneyKey(st.Amount), st.ProviderRefundID)
}
