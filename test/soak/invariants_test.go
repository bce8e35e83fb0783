package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/ledger"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/test/harness"
)

// invariant is one row of the invariant table.
type invariant struct {
	Name       string   `json:"name"`
	Checked    int      `json:"checked"`
	Violations []string `json:"violations"`
}

func (iv *invariant) fail(format string, args ...any) {
	iv.Violations = append(iv.Violations, fmt.Sprintf(format, args...))
}

// state is everything the checks read, gathered once the soak settled.
type state struct {
	deliveries, calls []harness.Call
	payments          map[string]*v1alpha1.Payment // by name
	refunds           map[string]*v1alpha1.Refund  // by name
	events            []v1alpha1.WebhookEvent
	byRef             map[string]map[string][]paysim.PaymentView // provider -> merchant reference -> payments
	byID              map[string]paysim.PaymentView              // "<provider>/<id>"
	simRefunds        map[string][]simRefund                     // refund reference -> paysim's refunds
	counters          paysim.Counters
	plan              []*planned
	// uids are every Refund object the soak created, by UID.
	uids map[types.UID]*plannedRefund
}

// simRefund is one refund paysim made.
type simRefund struct {
	paysim.RefundView
	Provider, PaymentID string
}

// gather reads paysim's record and the API server's objects.
func (s *soak) gather(ctx context.Context) *state {
	t := s.t
	// Deliveries first: every one acknowledged in this snapshot was stored
	// before its answer, so it is in the lists read after it.
	st := &state{deliveries: s.hookRec.Calls(), calls: s.provRec.Calls(), payments: map[string]*v1alpha1.Payment{},
		refunds: map[string]*v1alpha1.Refund{}, byRef: map[string]map[string][]paysim.PaymentView{},
		byID: map[string]paysim.PaymentView{}, simRefunds: map[string][]simRefund{}, uids: map[types.UID]*plannedRefund{}}
	c := s.st.CP.Client
	var ps v1alpha1.PaymentList
	var rs v1alpha1.RefundList
	var evs v1alpha1.WebhookEventList
	for _, l := range []client.ObjectList{&ps, &rs, &evs} {
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ps.Items {
		st.payments[ps.Items[i].Name] = &ps.Items[i]
	}
	for i := range rs.Items {
		st.refunds[rs.Items[i].Name] = &rs.Items[i]
	}
	st.events = evs.Items
	for _, prov := range providers {
		views, err := s.st.Sim.Payments(ctx, prov)
		if err != nil {
			t.Fatal(err)
		}
		st.byRef[prov] = map[string][]paysim.PaymentView{}
		for _, v := range views {
			st.byRef[prov][v.MerchantReference] = append(st.byRef[prov][v.MerchantReference], v)
			st.byID[prov+"/"+v.ID] = v
			for _, r := range v.Refunds {
				st.simRefunds[r.Reference] = append(st.simRefunds[r.Reference], simRefund{RefundView: r, Provider: prov, PaymentID: v.ID})
			}
		}
	}
	var err error
	if st.counters, err = s.st.Sim.Counters(ctx); err != nil {
		t.Fatal(err)
	}
	st.plan = s.snapshot()
	s.mu.Lock()
	for _, p := range st.plan {
		for _, r := range p.Refunds {
			for _, uid := range r.UIDs {
				st.uids[uid] = r
			}
		}
	}
	s.mu.Unlock()
	return st
}

// sim is paysim's view of p's Payment (by the provider id paywarden
// recorded, else the one payment of its merchant reference).
func (st *state) sim(pl *planned) (paysim.PaymentView, bool) {
	if p := st.payments[pl.Name]; p != nil && p.Status.ProviderPaymentID != "" {
		if v, ok := st.byID[pl.Provider+"/"+p.Status.ProviderPaymentID]; ok {
			return v, true
		}
	}
	if vs := st.byRef[pl.Provider][pl.Name]; len(vs) == 1 {
		return vs[0], true
	}
	return paysim.PaymentView{}, false
}

// check gathers what paywarden and paysim ended with and checks every
// invariant; a violation names the payment or Refund and shows its history.
func (s *soak) check(ctx context.Context) {
	st := s.gather(ctx)
	var (
		oneCharge   = &invariant{Name: "no merchant reference charged twice (paysim payments per reference <= 1)"}
		agrees      = &invariant{Name: "every Payment's phase and review reason agree with the provider's record"}
		noFailed    = &invariant{Name: "no Failed without a provider failure"}
		legal       = &invariant{Name: "every Payment history step is in the state machine's table (payment.AllowedTransitions)"}
		refundLegal = &invariant{Name: "every Refund history step is in the state machine's table (payment.AllowedRefundTransitions)"}
		noSchedule  = &invariant{Name: "no settled Payment or Refund keeps query.nextTime"}
		refunded    = &invariant{Name: "every Payment's amountRefunded equals the provider's refunded total"}
		bounds      = &invariant{Name: "captured <= authorized, captured = what was asked, refunded <= received (provider's record)"}
		onceOps     = &invariant{Name: "each capture and cancel executed at most once, and repeated only after its sender looked the payment up"}
		onceRefunds = &invariant{Name: "each Refund refunded at most once; every provider refund is a Refund's"}
		refundPhase = &invariant{Name: "every Refund's final phase agrees with the provider's record of its refund"}
		overRefund  = &invariant{Name: "every over-refund attempt ends Failed/OverRefund without any provider call"}
		storedOnce  = &invariant{Name: "every delivered webhook event stored exactly once"}
		finished    = &invariant{Name: "every stored event finished (not Pending or Orphaned)"}
		rate        = &invariant{Name: fmt.Sprintf("provider calls within the rate limit (burst %d + %d/s * t, per manager process)", burst, qps)}
		oneManager  = &invariant{Name: "no two managers called the provider at once (each manager's calls in one stretch)"}
		killed      = &invariant{Name: "every kill of the manager hit the leader, and another manager took over"}
		adopted     = &invariant{Name: "every re-applied Payment adopts its first object's outcome, nothing created (adoptedAt, phase, provider id)"}
		adoptedRf   = &invariant{Name: "every re-applied Refund adopts its first object's outcome, nothing refunded"}
	)
	allowed := payment.AllowedTransitions()
	allowedRefund := payment.AllowedRefundTransitions()

	for _, pl := range st.plan {
		p := st.payments[pl.Name]
		// One charge per order.
		oneCharge.Checked++
		if got := st.byRef[pl.Provider][pl.Name]; len(got) > 1 {
			ids := make([]string, len(got))
			for i, v := range got {
				ids[i] = v.ID
			}
			oneCharge.fail("%s (%s): %d provider payments %v\n    %s", pl.Name, pl.Provider, len(got), ids, history(p))
		} else if len(got) == 0 {
			oneCharge.fail("%s (%s): never created at the provider\n    %s", pl.Name, pl.Provider, history(p))
		}
		if p == nil {
			agrees.fail("%s: no Payment object", pl.Name)
			continue
		}
		view, haveView := st.sim(pl)
		s.checkPhase(agrees, pl, p, view, haveView)
		if p.Status.Phase == v1alpha1.PhaseFailed {
			noFailed.Checked++
			if !haveView || !simFailed(pl.Provider, view) {
				noFailed.fail("%s (%s): Failed, provider says %q\n    %s", pl.Name, pl.Provider, view.State, history(p))
			}
		}
		legal.Checked++
		if why := illegalStep(p, allowed); why != "" {
			legal.fail("%s (%s): %s\n    %s", pl.Name, pl.Provider, why, history(p))
		}
		if pl.Reapply {
			checkAdopted(adopted, pl, p)
		}
		if settled(p) {
			noSchedule.Checked++
			if p.Status.Query.NextTime != nil {
				noSchedule.fail("%s (%s): %s with query.nextTime %s\n    %s", pl.Name, pl.Provider, p.Status.Phase, p.Status.Query.NextTime, history(p))
			}
		}
		if haveView {
			checkMoney(refunded, bounds, onceOps, st, pl, p, view)
		}
		for _, r := range pl.Refunds {
			s.checkRefund(st, refundPhase, overRefund, adoptedRf, refundLegal, noSchedule, allowedRefund, pl, p, r)
		}
	}
	checkProviderRefunds(onceRefunds, st)
	checkEvents(storedOnce, finished, st)
	rateFig := checkRates(rate, oneManager, st)
	s.checkKills(killed)

	invs := []*invariant{oneCharge, agrees, noFailed, legal, refundLegal, noSchedule, refunded, bounds, onceOps, onceRefunds,
		refundPhase, overRefund, storedOnce, finished, rate, oneManager, killed, adopted, adoptedRf}
	fig := s.figures(ctx, st, rateFig)
	s.report(invs, fig)
	for _, iv := range invs {
		for i, v := range iv.Violations {
			if i == 10 {
				s.t.Errorf("%s: %d more violations (see %s)", iv.Name, len(iv.Violations)-10, filepath.Join(s.dir, "..", "results.json"))
				break
			}
			s.t.Errorf("%s: %s", iv.Name, v)
		}
	}
}

// checkPhase: the payment ended where the story and the provider's record
// say: a payment that took money Succeeded, PartiallyRefunded or Refunded as
// the provider's refunded total stands to what it received.
func (s *soak) checkPhase(iv *invariant, pl *planned, p *v1alpha1.Payment, view paysim.PaymentView, haveView bool) {
	iv.Checked++
	wantPhase, wantReview := pl.expected()
	if pl.Story == CancelRacesCapture && haveView && (view.State == "canceled" || view.State == "voided") {
		wantPhase = v1alpha1.PhaseCanceled
	}
	if wantPhase == v1alpha1.PhaseSucceeded && haveView {
		switch {
		case view.Refunded > 0 && view.Refunded >= view.Received:
			wantPhase = v1alpha1.PhaseRefunded
		case view.Refunded > 0:
			wantPhase = v1alpha1.PhasePartiallyRefunded
		}
	}
	if p.Status.Phase != wantPhase || reviewReason(p.Status.Conditions) != wantReview {
		iv.fail("%s (%s, %s): want %s %q, got %s %q (provider: %s, received %d, refunded %d)\n    %s", pl.Name, pl.Provider, pl.Story,
			wantPhase, wantReview, p.Status.Phase, reviewReason(p.Status.Conditions), view.State, view.Received, view.Refunded, history(p))
	}
}

// simFailed: the provider's record shows a failed payment (Stripe: the
// attempt's failure put the PaymentIntent back to requires_payment_method).
func simFailed(prov string, v paysim.PaymentView) bool {
	return v.State == "failed" || (prov == paysim.Stripe && v.State == "requires_payment_method")
}

func checkAdopted(iv *invariant, pl *planned, p *v1alpha1.Payment) {
	// Deleted once settled and applied again: the new object must have taken
	// the first one's outcome from the ledger, not from a create of its own.
	iv.Checked++
	first := pl.First
	switch {
	case pl.ReapplyErr != "":
		iv.fail("%s (%s, %s): %s\n    %s", pl.Name, pl.Provider, pl.Story, pl.ReapplyErr, history(p))
	case first == nil:
		iv.fail("%s (%s, %s): never deleted\n    %s", pl.Name, pl.Provider, pl.Story, history(p))
	case p.UID == first.UID:
		iv.fail("%s (%s): re-applied, but the object is still the first one (uid %s)\n    %s", pl.Name, pl.Provider, p.UID, history(p))
	case p.Status.Phase != first.Status.Phase || p.Status.ProviderPaymentID != first.Status.ProviderPaymentID ||
		p.Status.CreateRequestedAt != nil || p.Status.AdoptedAt == nil || !fromLedger(p.Status.History):
		iv.fail("%s (%s, %s): re-applied %.1fs after its delete; first object %s with provider id %q, the new one %s with provider id %q, adoptedAt %v, history from the ledger %v, create requested %v\n    %s",
			pl.Name, pl.Provider, pl.Story, pl.Reapplied.Sub(pl.Deleted).Seconds(), first.Status.Phase, first.Status.ProviderPaymentID,
			p.Status.Phase, p.Status.ProviderPaymentID, p.Status.AdoptedAt, fromLedger(p.Status.History), p.Status.CreateRequestedAt, history(p))
	}
}

// checkMoney compares the payment's money with the provider's record.
func checkMoney(refunded, bounds, once *invariant, st *state, pl *planned, p *v1alpha1.Payment, view paysim.PaymentView) {
	refunded.Checked++
	got := int64(0)
	if a := p.Status.AmountRefunded; a != nil {
		got = a.Value
	}
	if got != view.Refunded {
		refunded.fail("%s (%s): amountRefunded %d, the provider refunded %d (refunds %+v)\n    %s", pl.Name, pl.Provider, got, view.Refunded, view.Refunds, history(p))
	}
	bounds.Checked++
	if view.Refunded > view.Received {
		bounds.fail("%s (%s): the provider refunded %d of %d received", pl.Name, pl.Provider, view.Refunded, view.Received)
	}
	if a := view.Authorization; a != nil && view.Received > a.Amount {
		bounds.fail("%s (%s): captured %d of %d authorized", pl.Name, pl.Provider, view.Received, a.Amount)
	}
	if pl.Story.manual() && p.Status.Phase.TookMoney() {
		want := pl.Amount
		if pl.Story == CapturePartial {
			want = pl.Capture
		}
		if view.Received != want {
			bounds.fail("%s (%s, %s): captured %d, asked for %d\n    %s", pl.Name, pl.Provider, pl.Story, view.Received, want, history(p))
		}
	}
	if p.Status.Phase.TookMoney() {
		if a := p.Status.AmountReceived; a != nil && a.Value != view.Received {
			bounds.fail("%s (%s): amountReceived %d, the provider received %d\n    %s", pl.Name, pl.Provider, a.Value, view.Received, history(p))
		}
	}
	once.Checked++
	captures, voids := st.counters.CapturesByPayment[view.ID], st.counters.VoidsByPayment[view.ID]
	switch {
	case captures > 1 || voids > 1 || captures+voids > 1:
		once.fail("%s (%s): %d captures and %d cancels took effect at the provider\n    %s", pl.Name, pl.Provider, captures, voids, history(p))
	case (pl.Story == CaptureAll || pl.Story == CapturePartial || pl.Story == CaptureAtKill) && captures != 1:
		once.fail("%s (%s, %s): %d captures took effect, want 1\n    %s", pl.Name, pl.Provider, pl.Story, captures, history(p))
	case pl.Story == Cancel && voids != 1:
		once.fail("%s (%s, %s): %d cancels took effect, want 1\n    %s", pl.Name, pl.Provider, pl.Story, voids, history(p))
	}
	checkRepeats(once, st, pl, p, view)
}

// checkRepeats: a capture or cancel call sent again with the key of an
// earlier one (its outcome was unknown: no answer, a crash) follows a look
// at the payment by the process that repeats it, made after the earlier
// call went out — the lookup that tells a call that took effect from one
// that did not.
func checkRepeats(once *invariant, st *state, pl *planned, p *v1alpha1.Payment, view paysim.PaymentView) {
	ids := []string{view.ID}
	if a := view.Authorization; a != nil && a.ID != "" {
		ids = append(ids, a.ID)
	}
	about := func(c harness.Call) bool {
		if !strings.HasPrefix(c.Path, "/"+pl.Provider+"/") {
			return false
		}
		for _, id := range ids {
			if strings.Contains(c.Path, "/"+id+"/") || strings.HasSuffix(c.Path, "/"+id) {
				return true
			}
		}
		return false
	}
	var ops, reads []harness.Call
	for _, c := range st.calls {
		switch {
		case !about(c):
		case c.Method == "POST" && isOperation(c.Path):
			ops = append(ops, c)
		case c.Method == "GET" && c.Status == 200:
			reads = append(reads, c)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].At.Before(ops[j].At) })
	describe := func() string {
		var b strings.Builder
		for _, c := range ops {
			fmt.Fprintf(&b, "\n      %s %s by %s: %d, replayed %v, held %v, dropped %v, refused %v", c.At.Format("15:04:05.000"), c.Path, c.Owner, c.Status, c.Replayed, c.Held, c.Dropped, c.Refused)
		}
		for _, c := range reads {
			fmt.Fprintf(&b, "\n      %s GET %s by %s", c.At.Format("15:04:05.000"), c.Path, c.Owner)
		}
		return b.String()
	}
	for k, c := range ops {
		var prev *harness.Call
		for j := k - 1; j >= 0; j-- {
			if ops[j].Key == c.Key && c.Key != "" && !ops[j].Refused {
				prev = &ops[j]
				break
			}
		}
		if prev == nil {
			continue
		}
		looked := false
		for _, r := range reads {
			looked = looked || (r.Owner == c.Owner && r.At.After(prev.At) && r.At.Before(c.At))
		}
		if !looked {
			once.fail("%s (%s, %s): %s at %s by %s repeats the call of %s without a look at the payment since (capture and cancel calls, answered reads):%s\n    %s",
				pl.Name, pl.Provider, pl.Story, c.Path, c.At.Format("15:04:05.000"), c.Owner, prev.At.Format("15:04:05.000"), describe(), history(p))
		}
	}
}

// isOperation: a capture, cancel or void call.
func isOperation(path string) bool {
	return strings.HasSuffix(path, "/capture") || strings.HasSuffix(path, "/cancel") || strings.HasSuffix(path, "/void")
}

// checkRefund checks one planned Refund (every object of its name) against
// its story and the provider's record.
func (s *soak) checkRefund(st *state, phase, over, adopted, legal, noSchedule *invariant, allowed map[v1alpha1.RefundPhase][]v1alpha1.RefundPhase,
	pl *planned, p *v1alpha1.Payment, r *plannedRefund) {
	rf := st.refunds[r.Name]
	if rf == nil {
		phase.Checked++
		phase.fail("Refund %s (%s, %s): no object (created %v)", r.Name, pl.Provider, pl.RefundPlan, !r.Created.IsZero())
		return
	}
	legal.Checked++
	if why := illegalRefundStep(rf, allowed); why != "" {
		legal.fail("Refund %s (%s): %s\n    %s", r.Name, pl.Provider, why, refundHistory(rf))
	}
	if refundSettled(rf) {
		noSchedule.Checked++
		if rf.Status.Query.NextTime != nil {
			noSchedule.fail("Refund %s: %s with query.nextTime %s\n    %s", r.Name, rf.Status.Phase, rf.Status.Query.NextTime, refundHistory(rf))
		}
	}
	if r.Reapply {
		checkRefundAdopted(adopted, st, pl, r, rf)
		rf = r.First // what the provider did is the first object's
		if rf == nil {
			return
		}
	}
	phase.Checked++
	wantPhase, wantReason := r.expected()
	got := rf.Status.Phase
	reason := reviewReason(rf.Status.Conditions)
	if got == v1alpha1.RefundFailed && rf.Status.Failure != nil {
		reason = rf.Status.Failure.Code
	}
	if r.Reversed && got == v1alpha1.RefundFailed && refundHistoryHas(rf, v1alpha1.ReasonRefundReversed) {
		reason = v1alpha1.ReasonRefundReversed
	}
	if got != wantPhase || reason != wantReason {
		phase.fail("Refund %s (%s, %s): want %s %q, got %s %q\n    %s", r.Name, pl.Provider, pl.RefundPlan, wantPhase, wantReason, got, reason, refundHistory(rf))
	}
	ref := rf.Reference()
	mine := st.simRefunds[ref]
	if r.Over {
		over.Checked++
		key := payment.RefundKey(p, rf)
		var sent []string
		for _, c := range st.calls {
			if c.Key == key {
				sent = append(sent, fmt.Sprintf("%s %s at %s (%d)", c.Method, c.Path, c.At.Format("15:04:05.000"), c.Status))
			}
		}
		if n := st.counters.ActionsByKey[pl.Provider+"/"+key]; n > 0 || len(sent) > 0 || len(mine) > 0 || got != v1alpha1.RefundFailed || reason != v1alpha1.ReasonOverRefund {
			over.fail("Refund %s (%s, %s): %s %q; provider calls with its key %v (paysim counted %d), provider refunds %+v\n    %s",
				r.Name, pl.Provider, pl.RefundPlan, got, reason, sent, n, mine, refundHistory(rf))
		}
		return
	}
	// The provider's record of this object's refund (by its reference).
	if len(mine) != 1 {
		phase.fail("Refund %s (%s, %s): %d provider refunds with its reference %s: %+v\n    %s", r.Name, pl.Provider, pl.RefundPlan, len(mine), ref, mine, refundHistory(rf))
		return
	}
	sim := mine[0]
	want := map[v1alpha1.RefundPhase]string{v1alpha1.RefundSucceeded: "succeeded", v1alpha1.RefundFailed: "failed", v1alpha1.RefundUnknown: "pending"}[got]
	amount := int64(-1)
	if a := rf.Status.Amount; a != nil {
		amount = a.Value
	}
	if sim.Status != want || sim.ID != rf.Status.ProviderRefundID || sim.Amount != amount {
		phase.fail("Refund %s (%s, %s): %s for %d as provider refund %s; the provider's refund with its reference is %s %s for %d\n    %s",
			r.Name, pl.Provider, pl.RefundPlan, got, amount, rf.Status.ProviderRefundID, sim.ID, sim.Status, sim.Amount, refundHistory(rf))
	}
	if r.RecreateAmount > 0 {
		// The first object of the name refunded once, its own amount, and
		// the new one's refund is its own (checked above).
		phase.Checked++
		first := r.First
		if first == nil || amount != r.RecreateAmount {
			phase.fail("Refund %s re-created: the new object %s for %d, want its own refund of %d\n    %s", r.Name, got, amount, r.RecreateAmount, refundHistory(rf))
			return
		}
		if old := st.simRefunds[first.Reference()]; len(old) != 1 || old[0].Amount != r.Amount || old[0].Status != "succeeded" {
			phase.fail("Refund %s re-created: the first object's refunds at the provider %+v, want one of %d", r.Name, old, r.Amount)
		}
	}
}

func checkRefundAdopted(iv *invariant, st *state, pl *planned, r *plannedRefund, rf *v1alpha1.Refund) {
	iv.Checked++
	first := r.First
	switch {
	case r.ReapplyErr != "":
		iv.fail("Refund %s (%s): %s\n    %s", r.Name, pl.Provider, r.ReapplyErr, refundHistory(rf))
	case first == nil:
		iv.fail("Refund %s (%s): never deleted\n    %s", r.Name, pl.Provider, refundHistory(rf))
	case rf.UID == first.UID:
		iv.fail("Refund %s (%s): re-applied, but the object is still the first one\n    %s", r.Name, pl.Provider, refundHistory(rf))
	case rf.Status.Phase != first.Status.Phase || rf.Status.ProviderRefundID != first.Status.ProviderRefundID ||
		rf.Status.CreateRequestedAt != nil || rf.Status.AdoptedAt == nil || !fromLedger(rf.Status.History) || len(st.simRefunds[rf.Reference()]) > 0:
		iv.fail("Refund %s (%s): first object %s as %q, the new one %s as %q, adoptedAt %v, from the ledger %v, refund requested %v, provider refunds with its reference %+v\n    %s",
			r.Name, pl.Provider, first.Status.Phase, first.Status.ProviderRefundID, rf.Status.Phase, rf.Status.ProviderRefundID,
			rf.Status.AdoptedAt, fromLedger(rf.Status.History), rf.Status.CreateRequestedAt, st.simRefunds[rf.Reference()], refundHistory(rf))
	}
}

// checkProviderRefunds: every refund the provider made carries the
// reference of a Refund the soak created, and no reference was refunded
// twice.
func checkProviderRefunds(iv *invariant, st *state) {
	for ref, rs := range st.simRefunds {
		iv.Checked++
		parsed, ok := payment.ParseRefundReference(ref)
		if !ok || st.uids[types.UID(parsed.UID)] == nil {
			iv.fail("provider refunds %+v carry reference %q, no Refund the soak created", rs, ref)
			continue
		}
		if len(rs) > 1 {
			iv.fail("Refund %s (uid %s) refunded %d times at the provider: %+v", parsed.Name, parsed.UID, len(rs), rs)
		}
	}
	for id, n := range st.counters.RefundsByPayment {
		for key, v := range st.byID {
			if v.ID == id && n != len(v.Refunds) {
				iv.fail("%s: paysim counted %d refunds, its record holds %d", key, n, len(v.Refunds))
			}
		}
	}
}

func checkEvents(storedOnce, finished *invariant, st *state) {
	stored := map[string]int{}
	for _, e := range st.events {
		stored[e.Spec.Provider+"/"+e.Spec.EventID]++
		finished.Checked++
		if !e.Status.Result.IsDone() || e.Status.Result == v1alpha1.ResultOrphaned {
			finished.fail("%s (event %s of %s for %s): %s %s", e.Name, e.Spec.EventID, e.Spec.Provider, e.Spec.Payment, e.Status.Result, e.Status.Message)
		}
	}
	delivered := map[string]bool{}
	ok2xx := 0
	for _, d := range st.deliveries {
		if d.Status < 200 || d.Status > 299 {
			continue
		}
		ok2xx++
		prov := d.Path[strings.LastIndexByte(d.Path, '/')+1:]
		var body struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(d.Body, &body); err != nil || body.ID == "" {
			storedOnce.fail("delivery to %s acknowledged %d without an event id", d.Path, d.Status)
			continue
		}
		delivered[prov+"/"+body.ID] = true
	}
	if len(st.deliveries) > 0 && ok2xx == 0 {
		// A receiver that refuses everything would pass the rest vacuously.
		storedOnce.fail("none of %d webhook deliveries was acknowledged: the receiver refused them all (see its log)", len(st.deliveries))
	}
	for key := range delivered {
		storedOnce.Checked++
		if n := stored[key]; n != 1 {
			storedOnce.fail("event %s acknowledged to the provider, stored %d times", key, n)
		}
	}
	for key, n := range stored {
		if n > 1 && !delivered[key] {
			storedOnce.fail("event %s stored %d times", key, n)
		}
	}
}

// rateFigures are what the rate and manager checks measured.
type rateFigures struct {
	worst      string
	byManager  map[string]int
	unattested int
}

// checkRates checks the token bucket per provider and per manager process
// (each starts with a full bucket), and that the managers' calls never
// interleave: once another manager has called the provider, an earlier one
// never calls again.
func checkRates(rate, one *invariant, st *state) rateFigures {
	fig := rateFigures{byManager: map[string]int{}}
	inner := innerReads(st.calls)
	var mine []harness.Call
	for i, c := range st.calls {
		switch {
		case !gated(c.Path) || inner[i]:
		case strings.HasPrefix(c.Owner, "manager"):
			mine = append(mine, c)
			fig.byManager[c.Owner]++
		case c.Owner == "":
			fig.unattested++
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].At.Before(mine[j].At) })
	done := map[string]time.Time{} // managers whose stretch ended, and when
	cur := ""
	for _, c := range mine {
		one.Checked++
		if c.Owner == cur {
			continue
		}
		if at, ok := done[c.Owner]; ok {
			one.fail("%s called %s at %s after %s had taken over (its stretch ended at %s)", c.Owner, c.Path, c.At.Format("15:04:05.000"), cur, at.Format("15:04:05.000"))
		}
		if cur != "" {
			done[cur] = c.At
		}
		cur = c.Owner
	}
	worstExcess := -1e9
	for _, prov := range providers {
		for owner := range fig.byManager {
			var ts []time.Time
			for _, c := range mine {
				if c.Owner == owner && strings.HasPrefix(c.Path, "/"+prov+"/") {
					ts = append(ts, c.At)
				}
			}
			rate.Checked += len(ts)
			excess, count, span := worstWindow(ts, qps)
			if excess > worstExcess {
				worstExcess = excess
				fig.worst = fmt.Sprintf("%s by %s: %d calls in %.2fs (allowed %.1f)", prov, owner, count, span.Seconds(), burst+qps*span.Seconds())
			}
			if excess > burst+1 {
				rate.fail("%s, %s: %d calls in %.2fs, more than burst %d + %d/s", prov, owner, count, span.Seconds(), burst, qps)
			}
		}
	}
	return fig
}

// checkKills: each kill was aimed at the Lease holder of the moment, and a
// Lease holder other than the killed one followed.
func (s *soak) checkKills(iv *invariant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kills {
		iv.Checked++
		var before, after *leaderTerm
		for i := range s.leaders {
			l := &s.leaders[i]
			if !l.From.After(k.At) {
				before = l
			} else if after == nil && l.Identity != k.Identity {
				after = l
			}
		}
		switch {
		case before == nil || before.Identity != k.Identity:
			iv.fail("kill of %s at %s: it was not the Lease holder the soak last saw (%+v)", k.Manager, k.At.Format("15:04:05"), before)
		case after == nil:
			iv.fail("kill of %s (Lease holder %s) at %s: no other manager took the Lease", k.Manager, k.Identity, k.At.Format("15:04:05"))
		}
	}
	if len(s.kills) == 0 {
		iv.fail("no leader was killed")
	}
}

// innerReads are the requests an adapter makes inside one admitted call
// besides its own: PayPal's capture, void and refund read the order first
// (for the authorization or capture id), so each such POST takes its
// sender's latest read of an order before it (within the 3 s call timeout)
// with it.
func innerReads(calls []harness.Call) map[int]bool {
	inner := map[int]bool{}
	order := make([]int, len(calls))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return calls[order[a]].At.Before(calls[order[b]].At) })
	for k, i := range order {
		c := calls[i]
		if c.Method != "POST" || !strings.HasPrefix(c.Path, "/"+paysim.PayPal+"/v2/payments/") || !(isOperation(c.Path) || strings.HasSuffix(c.Path, "/refund")) {
			continue
		}
		for j := k - 1; j >= 0; j-- {
			r := calls[order[j]]
			if c.At.Sub(r.At) > 3*time.Second {
				break
			}
			if r.Owner == c.Owner && r.Method == "GET" && strings.HasPrefix(r.Path, "/"+paysim.PayPal+"/v2/checkout/orders/") && !inner[order[j]] {
				inner[order[j]] = true
				break
			}
		}
	}
	return inner
}

// gated reports whether a provider request went through paywarden's token
// bucket: everything but PayPal's OAuth token (fetched inside an admitted
// call) and webhook verification (the receiver's own, separately limited).
func gated(path string) bool {
	return !strings.HasSuffix(path, "/v1/oauth2/token") && !strings.HasSuffix(path, "/v1/notifications/verify-webhook-signature")
}

// worstWindow finds the window [t_i, t_j] with the largest count - qps*span
// (O(n): count - qps*span = (j+1 - qps*t_j) + (qps*t_i - i)).
func worstWindow(ts []time.Time, qps float64) (excess float64, count int, span time.Duration) {
	if len(ts) == 0 {
		return 0, 0, 0
	}
	t0 := ts[0]
	sec := func(x time.Time) float64 { return x.Sub(t0).Seconds() }
	bestI, bestVal := 0, qps*sec(ts[0])
	excess = -1e9
	for j := range ts {
		if v := qps*sec(ts[j]) - float64(j); v > bestVal {
			bestI, bestVal = j, v
		}
		if e := float64(j+1) - qps*sec(ts[j]) + bestVal; e > excess {
			excess, count, span = e, j-bestI+1, ts[j].Sub(ts[bestI])
		}
	}
	return excess, count, span
}

// fromLedger reports whether a history has a step taken from the ledger (an
// adoption).
func fromLedger(h []v1alpha1.HistoryEntry) bool {
	for _, e := range h {
		if e.Source == v1alpha1.SourceLedger {
			return true
		}
	}
	return false
}

func refundHistoryHas(rf *v1alpha1.Refund, reason string) bool {
	for _, h := range rf.Status.History {
		if strings.HasPrefix(h.Reason, reason) {
			return true
		}
	}
	return false
}

// providerAnswers are the channels a provider's answer comes through: only
// they (or, for an adopted object, the ledger's record of one) fail a
// payment.
var providerAnswers = []v1alpha1.ObservationSource{v1alpha1.SourceCreate, v1alpha1.SourceWebhook, v1alpha1.SourceStatusQuery,
	v1alpha1.SourceBackfill, v1alpha1.SourceCapture, v1alpha1.SourceCancel, v1alpha1.SourceAuthorize}

// illegalStep explains the first step of the history the state machine does
// not make (its explored table, payment.AllowedTransitions), or one no
// operator took in the soak, or returns "".
func illegalStep(p *v1alpha1.Payment, allowed map[v1alpha1.PaymentPhase][]v1alpha1.PaymentPhase) string {
	prev, known := v1alpha1.PaymentPhase(""), p.Status.HistoryDropped == 0
	for i, h := range p.Status.History {
		if known && h.From != prev {
			return fmt.Sprintf("step %d starts from %q, the previous step ended in %q", i+1, h.From, prev)
		}
		if !slices.Contains(allowed[h.From], h.To) {
			return fmt.Sprintf("step %d: %s -> %s is not a transition the state machine makes (it makes %s -> %v)", i+1, orEmpty(h.From), h.To, orEmpty(h.From), allowed[h.From])
		}
		if h.Source == v1alpha1.SourceManual {
			return fmt.Sprintf("step %d: %s -> %s by an operator, and nobody resolves anything in the soak", i+1, orEmpty(h.From), h.To)
		}
		if h.From == v1alpha1.PhaseExpired && h.To == v1alpha1.PhaseSucceeded && !strings.HasPrefix(h.Reason, v1alpha1.ReasonLateSuccess) {
			return fmt.Sprintf("step %d: Expired -> Succeeded without %s", i+1, v1alpha1.ReasonLateSuccess)
		}
		if h.To == v1alpha1.PhaseFailed && h.From != v1alpha1.PhaseFailed {
			switch {
			case slices.Contains(providerAnswers, h.Source):
			case h.Source == v1alpha1.SourceLedger && p.Status.AdoptedAt != nil:
				// An adopted payment: the provider's answer to its first
				// object, remembered in the ledger.
			default:
				return fmt.Sprintf("step %d: Failed through %s, not a provider answer", i+1, h.Source)
			}
		}
		prev, known = h.To, true
	}
	if known && len(p.Status.History) > 0 && prev != p.Status.Phase {
		return fmt.Sprintf("history ends in %s, the phase is %s", prev, p.Status.Phase)
	}
	return ""
}

// illegalRefundStep does the same for a Refund (payment.AllowedRefundTransitions).
func illegalRefundStep(rf *v1alpha1.Refund, allowed map[v1alpha1.RefundPhase][]v1alpha1.RefundPhase) string {
	prev, known := v1alpha1.RefundPhase(""), rf.Status.HistoryDropped == 0
	for i, h := range rf.Status.History {
		from, to := v1alpha1.RefundPhase(h.From), v1alpha1.RefundPhase(h.To)
		if known && from != prev {
			return fmt.Sprintf("step %d starts from %q, the previous step ended in %q", i+1, from, prev)
		}
		if !slices.Contains(allowed[from], to) {
			return fmt.Sprintf("step %d: %q -> %s is not a transition the refund machine makes (it makes %v)", i+1, from, to, allowed[from])
		}
		if h.Source == v1alpha1.SourceManual {
			return fmt.Sprintf("step %d: %q -> %s by an operator, and nobody resolves anything in the soak", i+1, from, to)
		}
		prev, known = to, true
	}
	if known && len(rf.Status.History) > 0 && prev != rf.Status.Phase {
		return fmt.Sprintf("history ends in %s, the phase is %s", prev, rf.Status.Phase)
	}
	return ""
}

func orEmpty(p v1alpha1.PaymentPhase) string {
	if p == "" {
		return "(new)"
	}
	return string(p)
}

func history(p *v1alpha1.Payment) string {
	if p == nil {
		return "(no Payment object)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, review %q, provider id %q, received %v, refunded %v, operation %s, query %s", p.Status.Phase, reviewReason(p.Status.Conditions),
		p.Status.ProviderPaymentID, p.Status.AmountReceived, p.Status.AmountRefunded, toJSON(p.Status.Operation), toJSON(p.Status.Query))
	for _, h := range p.Status.History {
		fmt.Fprintf(&b, "\n      %s %s -> %s via %s %s %s", h.Time.Format("15:04:05"), orEmpty(h.From), h.To, h.Source, h.EventID, h.Reason)
	}
	return b.String()
}

func refundHistory(rf *v1alpha1.Refund) string {
	if rf == nil {
		return "(no Refund object)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "uid %s, phase %s, review %q, amount %v, provider refund %q, failure %v, adoptedAt %v, marker %v", rf.UID, rf.Status.Phase,
		reviewReason(rf.Status.Conditions), rf.Status.Amount, rf.Status.ProviderRefundID, rf.Status.Failure, rf.Status.AdoptedAt, rf.Status.CreateRequestedAt)
	for _, h := range rf.Status.History {
		fmt.Fprintf(&b, "\n      %s %s -> %s via %s %s %s", h.Time.Format("15:04:05"), orEmpty(h.From), h.To, h.Source, h.EventID, h.Reason)
	}
	return b.String()
}

// ledgerShards counts the ledger's ConfigMaps.
func (s *soak) ledgerShards(ctx context.Context) int {
	var cms corev1.ConfigMapList
	n := 0
	if err := s.st.CP.Client.List(ctx, &cms, client.InNamespace(harness.SystemNamespace)); err == nil {
		for _, cm := range cms.Items {
			if strings.HasPrefix(cm.Name, ledger.ShardPrefix) {
				n++
			}
		}
	}
	return n
}

// writeResults writes the invariants and figures next to the run directory.
func (s *soak) writeResults(invs []*invariant, fig Figures) {
	out := struct {
		Invariants []*invariant `json:"invariants"`
		Figures    Figures      `json:"figures"`
	}{invs, fig}
	if data, err := json.MarshalIndent(out, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(s.dir, "..", "results.json"), data, 0o644)
	}
}
