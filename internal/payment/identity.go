package payment

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// The order, not the object (SPEC §12.1). Objects are deleted, re-applied,
// restored without status and removed by retention; the money they moved is
// not. Before a settled Payment or Refund disappears, its identity and
// outcome go into the ledger (LedgerRecord); a later object of the same
// identity adopts that outcome instead of moving money again. The rules
// below are pure: internal/ledger stores the records, the controllers read
// and write them.

// Kinds of ledger records.
const (
	LedgerPayment = "P"
	LedgerRefund  = "R"
)

// LedgerRecord is what the ledger keeps of one settled Payment or Refund.
type LedgerRecord struct {
	// Kind is LedgerPayment or LedgerRefund.
	Kind string
	// Name is the object's name (the attempt at the order, or the refund).
	Name string
	// Phase is the final phase it settled in.
	Phase string
	// ProviderID is the provider's payment id (Payment) or refund id (Refund).
	ProviderID string
	// Asked is the amount the spec asked for (a Refund without an amount: 0).
	Asked int64
	// Amount is what moved: received (Payment) or refunded (Refund).
	Amount int64
	// Refunded is the payment's cumulative refunded total (Payment only).
	Refunded int64
	Currency string
	// SettledAt is when it settled.
	SettledAt time.Time
	// RecordedAt is when the record was written (its object was let go);
	// the ledger forgets records by it.
	RecordedAt time.Time
}

// TookMoney reports whether the recorded object moved money (or may have):
// it did not end in a phase that frees its order.
func (r LedgerRecord) TookMoney() bool {
	if r.Kind == LedgerRefund {
		return r.Phase != string(v1alpha1.RefundFailed)
	}
	return !releasesReference(v1alpha1.PaymentPhase(r.Phase))
}

// Replaces reports whether r, written to the ledger, takes the place of old:
// both record the same object of an identity, and the later record is what
// it is now. A Payment's record is its attempt at the order (its name): the
// same attempt remembered again (adopted, then deleted again, perhaps
// refunded meanwhile) replaces its record. A record of an attempt that took
// no money never replaces one that did: a Payment of the same name asking
// another amount is parked as DuplicatePayment by Adopt, but an operator may
// resolve it Failed or Canceled, and remembered in its place it would let
// the order be charged again. A Refund's record is what it asked
// under its name (amount and currency; none asked: the rest of the
// payment): a Refund of the same name asking another amount is another
// refund (AdoptRefund), and every settled one is kept, so that a Refund
// asking any of them again adopts it instead of refunding twice; the same
// Refund remembered again replaces its own record, so re-applies and
// re-deletes do not grow the ledger.
func (r LedgerRecord) Replaces(old LedgerRecord) bool {
	if r.Kind != old.Kind || r.Name != old.Name {
		return false
	}
	if r.Kind == LedgerPayment {
		// An attempt remembered unsettled (deleted before its answer) may
		// have taken money; the same attempt settled since (an operator's
		// verdict after checking the provider) says whether it did.
		same := !v1alpha1.PaymentPhase(old.Phase).IsFinal() && r.Asked == old.Asked && r.Currency == old.Currency
		return r.TookMoney() || !old.TookMoney() || same
	}
	return r.asks(old.Asked, old.Currency)
}

// asks reports whether a Refund asking value of currency (none asked: 0 and
// "") asks what the refund record r asked. A record or Refund that names no
// currency matches any.
func (r LedgerRecord) asks(value int64, currency string) bool {
	return r.Asked == value && (r.Currency == "" || currency == "" || r.Currency == currency)
}

const recordVersion = "v1"

// Encode renders the record compactly: one line of '|'-separated fields.
func (r LedgerRecord) Encode() string {
	f := []string{recordVersion, r.Kind, r.Name, r.Phase, url.PathEscape(r.ProviderID),
		strconv.FormatInt(r.Asked, 10), strconv.FormatInt(r.Amount, 10), strconv.FormatInt(r.Refunded, 10),
		r.Currency, strconv.FormatInt(r.SettledAt.Unix(), 10), strconv.FormatInt(r.RecordedAt.Unix(), 10)}
	return strings.Join(f, "|")
}

// ErrUnreadableRecord: a ledger line DecodeRecord cannot read (written by a
// later release, or edited by hand). It may be the record that the order
// took its money, so its order's new objects wait until it is fixed.
var ErrUnreadableRecord = errors.New("unreadable ledger record")

// DecodeRecord reads a record written by Encode; a line it cannot read is
// ErrUnreadableRecord.
func DecodeRecord(s string) (LedgerRecord, error) {
	f := strings.Split(s, "|")
	if len(f) != 11 || f[0] != recordVersion {
		return LedgerRecord{}, fmt.Errorf("%w %q: want %s with 11 fields", ErrUnreadableRecord, s, recordVersion)
	}
	id, err := url.PathUnescape(f[4])
	if err != nil {
		return LedgerRecord{}, fmt.Errorf("%w %q: provider id: %w", ErrUnreadableRecord, s, err)
	}
	var n [5]int64
	for i, v := range []string{f[5], f[6], f[7], f[9], f[10]} {
		if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return LedgerRecord{}, fmt.Errorf("%w %q: %w", ErrUnreadableRecord, s, err)
		}
	}
	r := LedgerRecord{Kind: f[1], Name: f[2], Phase: f[3], ProviderID: id, Asked: n[0], Amount: n[1], Refunded: n[2],
		Currency: f[8], SettledAt: time.Unix(n[3], 0).UTC(), RecordedAt: time.Unix(n[4], 0).UTC()}
	if r.Kind != LedgerPayment && r.Kind != LedgerRefund || r.Name == "" || r.Phase == "" {
		return LedgerRecord{}, fmt.Errorf("%w %q: incomplete", ErrUnreadableRecord, s)
	}
	return r, nil
}

// NotStarted reports whether the payment has not been through its first
// reconcile: no phase, no create marker, no provider id (spec or status).
// No provider event can be about it yet; one that names its order is about
// an earlier object of the order, and waits until this one has adopted that
// object's outcome or been created (the inbox keeps it Orphaned).
func NotStarted(p *v1alpha1.Payment) bool {
	return p.Status.Phase == "" && p.Status.CreateRequestedAt == nil && ProviderID(p) == ""
}

// EventWaits says why a provider event resolved to p (by its order's
// merchant reference) cannot be applied to it yet ("" when it can); the
// inbox keeps such an event Orphaned, and p's next status write wakes it.
//   - p has not started (NotStarted): no event can be about it yet, so this
//     one is about an earlier object of the order; p first adopts that
//     object's outcome or is created.
//   - p's create may have gone out and is not answered: p has no provider
//     id to compare the event's with, and an earlier object of the order
//     (deleted, its event redelivered or backfilled) is reported under the
//     same reference. Taken as p's, its id and outcome would settle p while
//     p's own create may still charge. The answer gives p its id; then the
//     state machine tells p's news from another payment's (SPEC §12.1). A
//     create whose outcome stays unknown (Unknown) takes the event again.
func EventWaits(p *v1alpha1.Payment) string {
	st := &p.Status
	switch {
	case NotStarted(p):
		return fmt.Sprintf("payment %s has not been started yet (no status): the event waits until it has adopted its order's outcome or been created", p.Name)
	case ProviderID(p) == "" && st.CreateRequestedAt != nil && (st.Phase == "" || st.Phase == v1alpha1.PhasePending):
		return fmt.Sprintf("payment %s has no provider id yet (its create is not answered): the event may be about an earlier payment of its order and waits until this one has its id", p.Name)
	}
	return ""
}

// MoneyMayMove reports whether a money-moving call of the payment may have
// gone out or may go out now: its create or operation marker is stored (or
// due), so the object must not disappear before it is settled.
func MoneyMayMove(p *v1alpha1.Payment) bool {
	return p.Status.CreateRequestedAt != nil || p.Status.Operation != nil
}

// Settled reports whether nothing of the payment is in flight any more: a
// final phase and no operation under way. Only then may its object go.
func Settled(p *v1alpha1.Payment) bool {
	return p.Status.Phase.IsFinal() && p.Status.Operation == nil
}

// InFlight says, for a deleted payment that must wait, what it waits for
// ("" when it may go).
func InFlight(p *v1alpha1.Payment) string {
	st := &p.Status
	switch {
	case Settled(p):
		return ""
	case !MoneyMayMove(p) && ProviderID(p) == "":
		return ""
	case st.Operation != nil:
		return fmt.Sprintf("the outcome of its %s (requested %s)", st.Operation.Kind, st.Operation.RequestedAt.UTC().Format(time.RFC3339))
	case ProviderID(p) == "":
		return fmt.Sprintf("the outcome of its create (requested %s)", st.CreateRequestedAt.UTC().Format(time.RFC3339))
	case st.Phase == v1alpha1.PhaseUnknown:
		return fmt.Sprintf("a decision on its review (%s): kubectl paywarden resolve %s -n %s --phase Succeeded|Failed --reason ... (annotation %s)",
			st.WaitingFor, p.Name, p.Namespace, v1alpha1.AnnotationResolve)
	case st.Phase == v1alpha1.PhaseAuthorized:
		return fmt.Sprintf("its authorization to be captured or canceled: kubectl paywarden capture|cancel %s -n %s (annotations %s, %s); otherwise it ends when the authorization expires",
			p.Name, p.Namespace, v1alpha1.AnnotationCapture, v1alpha1.AnnotationCancel)
	}
	return fmt.Sprintf("the provider's final answer (it is %s)", st.Phase)
}

// PaymentRecord is the ledger record of a settled payment; false while it is
// not settled.
func PaymentRecord(p *v1alpha1.Payment, now time.Time) (LedgerRecord, bool) {
	if !Settled(p) {
		return LedgerRecord{}, false
	}
	st := &p.Status
	r := LedgerRecord{Kind: LedgerPayment, Name: p.Name, Phase: string(st.Phase), ProviderID: ProviderID(p),
		Asked: p.Spec.Amount.Value, Currency: p.Spec.Amount.Currency, SettledAt: settledAt(p, now)}
	if releasesReference(st.Phase) && !releasesOrder(p) {
		// Deleted while under review (a success reported after it ended
		// without the money): the order may have been paid. Remembered as
		// Unknown, so that the order applied again waits for a human
		// instead of charging again.
		r.Phase = string(v1alpha1.PhaseUnknown)
	}
	if st.AmountReceived != nil {
		r.Amount = st.AmountReceived.Value
	}
	if st.AmountRefunded != nil {
		r.Refunded = st.AmountRefunded.Value
	}
	return r, true
}

// UnsettledRecord is the ledger record of a payment let go before its final
// answer (deleted with its PaymentProvider): its phase as it stands, which
// an object of the same order applied again takes as "ask a human".
func UnsettledRecord(p *v1alpha1.Payment, now time.Time) LedgerRecord {
	st := &p.Status
	r := LedgerRecord{Kind: LedgerPayment, Name: p.Name, Phase: string(st.Phase), ProviderID: ProviderID(p),
		Asked: p.Spec.Amount.Value, Currency: p.Spec.Amount.Currency, SettledAt: now}
	if r.Phase == "" {
		r.Phase = string(v1alpha1.PhasePending)
	}
	if st.AmountReceived != nil {
		r.Amount = st.AmountReceived.Value
	}
	if st.AmountRefunded != nil {
		r.Refunded = st.AmountRefunded.Value
	}
	return r
}

func settledAt(p *v1alpha1.Payment, now time.Time) time.Time {
	if n := len(p.Status.History); n > 0 {
		return p.Status.History[n-1].Time.Time
	}
	return now
}

// Unsent: nothing of p can have gone to the provider (no create marker, no
// provider id), and its status is empty or it was parked Unknown before any
// create: a copy or a duplicate of an order that could not be proven new.
// An operator's requery takes such a payment back into automatic handling;
// it is then judged as a copy again (adopted, parked again, looked up), and
// created only when nothing holds its order any more: a requery never
// creates on its own strength an order the ledger or a restore says may be
// charged (SPEC §12.1).
func Unsent(p *v1alpha1.Payment) bool {
	st := &p.Status
	return ProviderID(p) == "" && st.CreateRequestedAt == nil && (st.Phase == "" || st.Phase == v1alpha1.PhaseUnknown)
}

// Adopt decides what a Payment that was never sent to the provider (Unsent)
// makes of the ledger's records of its order:
//   - the same attempt (same name, amount and currency) adopts the record's
//     outcome: phase, ids and amounts, a history entry and an Event
//     "adopted: <id>, not created again";
//   - the same name asking another amount, or another attempt while one of
//     the order took money, is parked as DuplicatePayment, nothing sent;
//   - another attempt after attempts that took no money goes ahead (false).
func Adopt(p *v1alpha1.Payment, recs []LedgerRecord, now time.Time) (Outcome, bool) {
	if !Unsent(p) {
		return Outcome{}, false
	}
	asks := func(r *LedgerRecord) bool {
		return r.Asked == p.Spec.Amount.Value && r.Currency == p.Spec.Amount.Currency
	}
	// Of the records of p's name (Replaces keeps an attempt that took money
	// beside a later one of the name that did not), the latest asking what
	// p asks, else the latest that took money, else the latest.
	rank := func(r *LedgerRecord) int {
		switch {
		case asks(r):
			return 2
		case r.TookMoney():
			return 1
		}
		return 0
	}
	var same, holder *LedgerRecord
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Kind != LedgerPayment:
		case r.Name == p.Name:
			if same == nil || rank(r) >= rank(same) {
				same = r
			}
		case !releasesReference(v1alpha1.PaymentPhase(r.Phase)):
			holder = r
		}
	}
	rec := same
	if rec == nil {
		rec = holder
	}
	if rec == nil {
		return Outcome{}, false
	}
	if same == nil || !asks(rec) {
		c := begin(p, now)
		c.apply(Observation{
			Source: v1alpha1.SourceLedger, Observed: ObservedUnknown, Review: v1alpha1.ReasonDuplicatePayment,
			Reason: fmt.Sprintf("merchant reference %q of provider %s was already settled as %s (provider id %s, %s) by Payment %s, since deleted; this Payment asks %s and was not created at the provider, so the order cannot be charged twice: give a new order its own spec.merchantReference",
				p.MerchantRef(), p.Spec.ProviderRef.Name, rec.Phase, orNone(rec.ProviderID), v1alpha1.FormatAmount(rec.Asked, rec.Currency), rec.Name,
				v1alpha1.FormatAmount(p.Spec.Amount.Value, p.Spec.Amount.Currency)),
		})
		c.park()
		return c.done(), true
	}
	phase := v1alpha1.PaymentPhase(rec.Phase)
	c := begin(p, now)
	why := fmt.Sprintf("adopted: %s, not created again (settled as %s at %s before this object was deleted)",
		orNone(rec.ProviderID), rec.Phase, rec.SettledAt.UTC().Format(time.RFC3339))
	obs := Observation{Source: v1alpha1.SourceLedger, ProviderPaymentID: rec.ProviderID, Reason: why}
	money := func(v int64) *v1alpha1.Money { return &v1alpha1.Money{Value: v, Currency: rec.Currency} }
	switch phase {
	case v1alpha1.PhaseSucceeded, v1alpha1.PhasePartiallyRefunded, v1alpha1.PhaseRefunded:
		// What the earlier object received was checked when it settled (a
		// partial capture takes less than the order's amount): it is taken
		// as received, not checked against the spec again.
		obs.Observed = ObservedSucceeded
	case v1alpha1.PhaseFailed:
		obs.Observed = ObservedFailed
		obs.Failure = &v1alpha1.Failure{Code: "Adopted", Message: why}
	case v1alpha1.PhaseExpired:
		obs.Observed = ObservedExpired
	case v1alpha1.PhaseCanceled:
		obs.Observed = ObservedCanceled
	default:
		// The earlier object went before its final answer (deleted with its
		// provider): nothing is created; a human checks the provider.
		c := begin(p, now)
		c.apply(Observation{
			Source: v1alpha1.SourceLedger, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("an earlier Payment %s of this order was deleted while it was %s (provider id %s), before its final answer; nothing was created: check the provider, then resolve this Payment",
				rec.Name, rec.Phase, orNone(rec.ProviderID)),
		})
		c.park()
		return c.done(), true
	}
	before := len(c.st().History)
	c.apply(obs)
	if obs.Observed == ObservedSucceeded && rec.Amount > 0 {
		c.st().AmountReceived = money(rec.Amount)
	}
	if rec.Refunded > 0 {
		c.apply(Observation{Source: v1alpha1.SourceLedger, Observed: ObservedRefund, RefundedTotal: money(rec.Refunded), Reason: why})
	}
	// The history says where the phase came from: the ledger, not the
	// provider (the state machine words its own transitions).
	if h := c.st().History; len(h) > before {
		e := &h[before]
		e.Reason = strings.TrimSuffix(why+"; "+e.Reason, "; ")
	}
	c.park()
	t := metav1.NewTime(now)
	c.st().AdoptedAt = &t
	c.event(false, "Adopted", why)
	return c.done(), true
}

// RefundRecord is the ledger record of a settled refund; false while it is
// not settled, or when it neither went to the provider nor adopted the
// outcome of one that did. An adopted Refund is remembered again when it
// goes, as a Payment is: its record replaces the one it adopted (the same
// name and amount asked), and the ledger's retention counts from then.
func RefundRecord(r *v1alpha1.Refund, now time.Time) (LedgerRecord, bool) {
	st := &r.Status
	// A copy of a Refund that was sent (restored: its money-uid names
	// another object) settled by an operator's verdict is remembered too:
	// its manifest applied again must adopt the verdict, not refund again.
	copied := r.Annotations[v1alpha1.AnnotationMoneyUID] != "" && r.Annotations[v1alpha1.AnnotationMoneyUID] != string(r.UID)
	if !st.Phase.IsFinal() || st.CreateRequestedAt == nil && st.AdoptedAt == nil && !copied {
		return LedgerRecord{}, false
	}
	rec := LedgerRecord{Kind: LedgerRefund, Name: r.Name, Phase: string(st.Phase), ProviderID: st.ProviderRefundID, SettledAt: now}
	if a := r.Spec.Amount; a != nil {
		rec.Asked, rec.Currency = a.Value, a.Currency
	}
	if st.Amount != nil {
		rec.Amount, rec.Currency = st.Amount.Value, st.Amount.Currency
	}
	if n := len(st.History); n > 0 {
		rec.SettledAt = st.History[n-1].Time.Time
	}
	return rec, true
}

// RestoredRefund reports whether r is a copy of a Refund that was sent
// (restored from a backup without status): the money-uid annotation names
// another object, and nothing in status says a call: its status is empty,
// or it was parked Unknown before any call (Unsent says why).
func RestoredRefund(r *v1alpha1.Refund) bool {
	st := &r.Status
	if st.CreateRequestedAt != nil || st.ProviderRefundID != "" || st.Phase != "" && st.Phase != v1alpha1.RefundUnknown {
		return false
	}
	uid, ok := r.Annotations[v1alpha1.AnnotationMoneyUID]
	return ok && uid != string(r.UID)
}

// restoredRefund parks a restored copy the ledger does not know: its refund
// may have been made, so none is sent again.
func restoredRefund(r *v1alpha1.Refund, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	c.apply(Observation{Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
		Reason: fmt.Sprintf("restored without status from Refund %s (uid %s), which sent its refund; the ledger has no record of it, so none is sent again: check the provider (reference %s/%s/%s), then resolve this Refund",
			r.Name, r.Annotations[v1alpha1.AnnotationMoneyUID], r.Namespace, r.Name, r.Annotations[v1alpha1.AnnotationMoneyUID])})
	return c.done()
}

// UnsettledRefundRecord is the ledger record of a Refund let go before its
// final answer (its payment or provider gone): its phase as it stands.
func UnsettledRefundRecord(r *v1alpha1.Refund, now time.Time) LedgerRecord {
	st := &r.Status
	rec := LedgerRecord{Kind: LedgerRefund, Name: r.Name, Phase: string(st.Phase), ProviderID: st.ProviderRefundID, SettledAt: now}
	if rec.Phase == "" {
		rec.Phase = string(v1alpha1.RefundPending)
	}
	if a := r.Spec.Amount; a != nil {
		rec.Asked, rec.Currency = a.Value, a.Currency
	}
	if st.Amount != nil {
		rec.Amount, rec.Currency = st.Amount.Value, st.Amount.Currency
	}
	return rec
}

// RefundInFlight says what a deleted Refund waits for ("" when it may go).
func RefundInFlight(r *v1alpha1.Refund) string {
	st := &r.Status
	switch {
	case st.CreateRequestedAt == nil || st.Phase.IsFinal():
		return ""
	case st.ProviderRefundID == "":
		return fmt.Sprintf("the outcome of its refund call (requested %s)", st.CreateRequestedAt.UTC().Format(time.RFC3339))
	case st.Phase == v1alpha1.RefundUnknown:
		return fmt.Sprintf("a decision on its review: kubectl paywarden resolve refund/%s -n %s --phase Succeeded|Failed --reason ... (annotation %s)",
			r.Name, r.Namespace, v1alpha1.AnnotationResolve)
	}
	return fmt.Sprintf("the provider's final answer (it is %s)", st.Phase)
}

// AdoptRefund decides what a Refund that was never sent makes of the
// ledger's records of Refunds of the same name of the same order: the same
// refund (the same amount and currency asked, or none) adopts the outcome
// of the latest record asking it, whatever other amounts the name asked
// since; a Refund asking an amount no record asked is a new refund and goes
// ahead (false).
func AdoptRefund(r *v1alpha1.Refund, recs []LedgerRecord, now time.Time) (RefundOutcome, bool) {
	st := &r.Status
	if st.CreateRequestedAt != nil || st.Phase.IsFinal() {
		return RefundOutcome{}, false
	}
	var asked int64
	var currency string
	if a := r.Spec.Amount; a != nil {
		asked, currency = a.Value, a.Currency
	}
	var rec LedgerRecord
	for _, c := range recs {
		if c.Kind == LedgerRefund && c.Name == r.Name && c.asks(asked, currency) {
			rec = c
		}
	}
	if rec.Kind == "" {
		return RefundOutcome{}, false
	}
	why := fmt.Sprintf("adopted: %s, not refunded again (settled as %s at %s before this object was deleted)",
		orNone(rec.ProviderID), rec.Phase, rec.SettledAt.UTC().Format(time.RFC3339))
	return adoptedRefund(r, rec, why, now), true
}

func adoptedRefund(r *v1alpha1.Refund, rec LedgerRecord, why string, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	obs := Observation{Source: v1alpha1.SourceLedger, ProviderRefundID: rec.ProviderID, Reason: why}
	switch v1alpha1.RefundPhase(rec.Phase) {
	case v1alpha1.RefundSucceeded:
		obs.Observed, obs.Amount = ObservedSucceeded, &v1alpha1.Money{Value: rec.Amount, Currency: rec.Currency}
	case v1alpha1.RefundFailed:
		obs.Observed = ObservedFailed
		obs.Failure = &v1alpha1.Failure{Code: "Adopted", Message: why}
	default:
		// The earlier Refund went before its final answer: nothing is sent;
		// a human checks the provider.
		c.apply(Observation{Source: v1alpha1.SourceLedger, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("an earlier Refund %s of this payment was deleted while it was %s (refund id %s), before its final answer; nothing was sent: check the provider, then resolve this Refund",
				rec.Name, rec.Phase, orNone(rec.ProviderID))})
		return c.done()
	}
	c.apply(obs)
	t := metav1.NewTime(now)
	c.st().AdoptedAt = &t
	c.out.Events = append(c.out.Events, Event{Reason: "Adopted", Message: why})
	return c.done()
}

// Observe before create (crossplane's managed reconciler observes the
// external resource before it creates it). A Payment that arrives without
// status but carrying the money-uid annotation of another object was sent to
// the provider in an earlier life: it is a copy restored from a backup, or
// exported with kubectl and applied again. When the ledger cannot say what
// became of it, its merchant reference is looked up at the provider before
// anything is created. A Payment without it is proven new: its happy path is
// one create and no lookup.

// Restored reports whether p is such a copy: the money-uid annotation names
// another object, and p was never sent (Unsent).
func Restored(p *v1alpha1.Payment) bool {
	if !Unsent(p) {
		return false
	}
	uid, ok := p.Annotations[v1alpha1.AnnotationMoneyUID]
	return ok && uid != string(p.UID)
}

// afterObserve decides what the lookup of a restored Payment found: the
// provider's payment is adopted (phase and ids from the provider, a history
// entry and an Event "adopted: <id>, not created again"); nothing found (or
// a provider that cannot be searched) proves the order new, and the create
// marker is written; no answer waits on the backoff and looks again.
func afterObserve(c *change, pol Policy, call Call) Outcome {
	switch class := Classify(call.Err); {
	case class == Answered && call.Payment.ID != "":
		why := fmt.Sprintf("adopted: %s, not created again (restored without status; found at the provider by merchant reference %q)", call.Payment.ID, c.p.MerchantRef())
		before := len(c.st().History)
		c.st().Query.LastTime = ptrMicro(c.now)
		c.answered(call.Payment, v1alpha1.SourceCreate, false)
		if h := c.st().History; len(h) > before {
			h[before].Reason = strings.TrimSuffix(why+"; "+h[before].Reason, "; ")
		}
		c.startSchedule(pol)
		t := metav1.NewTime(c.now)
		c.st().AdoptedAt = &t
		c.event(false, "Adopted", why)
	case class == Answered:
		// An answer naming no payment proves nothing either way.
		c.noAnswer(pol, errors.New("the provider answered the look-up without a payment id"), false)
	case class == Unsupported && chargesOnCreate(c.p, pol):
		// A charge cannot be proven new where the provider cannot be
		// searched: creating it again could take the money twice.
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("restored without status from an object that sent its create, and the provider cannot be searched by merchant reference %q: not created again; check the provider, then resolve this Payment",
				c.p.MerchantRef()),
		})
		c.park()
	case class == Refused:
		// The provider refused the look-up (several payments carry the
		// reference: one per attempt at the order): the copy can be
		// neither adopted nor proven new.
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("restored without status from an object that sent its create, and looking merchant reference %q up found nothing usable (%s): not created again; check the provider, then resolve this Payment",
				c.p.MerchantRef(), call.Err),
		})
		c.park()
	case class == NotFound || class == Unsupported:
		if !c.p.DeletionTimestamp.IsZero() {
			// Deleted while its look-up was out (the answer is stored on
			// the API server's copy): nothing may start now (planCreate),
			// and the copy goes as it is.
			return c.done()
		}
		// The order is new: an operator's action carried by the copy
		// comes before its create (a cancel then sends nothing).
		if out, _, ok := OperatorAction(c.p, c.now); ok {
			return out
		}
		c.merge(markCreate(c.p, c.now))
	case class == ConfigProblem:
		c.configProblem(pol, call.Err)
	default:
		c.noAnswer(pol, call.Err, false)
	}
	return c.done()
}
