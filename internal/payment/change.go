package payment

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Outcome is a decision about a payment: the status to store, what the state
// machine decided on the way (for Events and metrics) and other Events to
// record. Status is a new value; the payment decided on is never modified.
type Outcome struct {
	Status  v1alpha1.PaymentStatus
	Results []Result
	Events  []Event
}

// change builds an Outcome on a private copy of the payment.
type change struct {
	p      *v1alpha1.Payment
	before *v1alpha1.Payment
	now    time.Time
	out    Outcome
}

func begin(p *v1alpha1.Payment, now time.Time) *change {
	return &change{p: p.DeepCopy(), before: p, now: now}
}

func (c *change) st() *v1alpha1.PaymentStatus { return &c.p.Status }

// phase is the payment's phase, a new payment counting as Pending.
func (c *change) phase() v1alpha1.PaymentPhase {
	if c.p.Status.Phase == "" {
		return v1alpha1.PhasePending
	}
	return c.p.Status.Phase
}

// apply runs the state machine on the payment as it stands in this change.
func (c *change) apply(obs Observation) Result {
	res := Apply(c.p, obs, c.now)
	c.p.Status = res.Status
	c.out.Results = append(c.out.Results, res)
	return res
}

// merge continues with the status and results of a nested decision.
func (c *change) merge(o Outcome) {
	c.p.Status = o.Status
	c.out.Results = append(c.out.Results, o.Results...)
	c.out.Events = append(c.out.Events, o.Events...)
}

func (c *change) event(warning bool, reason, message string) {
	c.out.Events = append(c.out.Events, Event{Warning: warning, Reason: reason, Message: message})
}

// park stops automatic handling: nothing scheduled, no run of unanswered
// calls. Used when paywarden gives up on a payment or a human must look.
func (c *change) park() {
	c.st().Query.NextTime = nil
	c.st().Query.UnansweredSince = nil
}

func (c *change) done() Outcome {
	if st := c.st(); st.Phase.IsFinal() && !c.before.Status.Phase.IsFinal() {
		// Settled now: failures of the calls before do not pace the reads a
		// settled payment may still need (RefundsUncounted).
		st.Query.ConsecutiveErrors = 0
	}
	settle(c.st())
	if op := c.before.Status.Operation; op != nil && op.Kind == v1alpha1.OperationCancel && c.st().Operation == nil && c.st().Phase.TookMoney() {
		// The payment turned out to have taken the money before the cancel
		// could be made (e.g. the charge a cancel looked for was found paid).
		c.event(true, "CancelRefused", fmt.Sprintf("payment is %s: it took the payer's money, so it cannot be canceled; create a Refund (kind Refund, spec.paymentRef %q) to return it", c.st().Phase, c.p.Name))
	}
	c.st().WaitingFor = WaitingFor(&c.p.Spec, c.st())
	if a := c.st().CustomerAction; a != nil && c.before.Status.CustomerAction == nil {
		msg := "the payer must act at the provider: " + a.URL
		if a.ExpiresAt != nil {
			msg += " (until " + a.ExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
		c.event(false, "CustomerActionRequired", msg)
	}
	c.out.Status = c.p.Status
	return c.out
}

func ptrMicro(t time.Time) *metav1.MicroTime {
	m := metav1.NewMicroTime(t)
	return &m
}

func ptrTime(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
