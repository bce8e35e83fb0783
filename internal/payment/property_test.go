package payment_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

var (
	propSeed = flag.Int64("payment.seed", 0, "seed of TestApplySequenceProperties; 0 picks one from the clock")
	propRuns = flag.Int("payment.sequences", 0, "random observation sequences TestApplySequenceProperties checks; 0: 2000, or 500 under -race")
)

// Sequence lengths: most are short; some are long enough to push history and
// the dedup ids past their bounds.
const (
	propMaxSteps     = 48
	propMaxLongSteps = 160
)

// TestApplySequenceProperties runs random observation sequences through the
// state machine — every channel, duplicates and reordering, wrong amounts,
// refunds, operator decisions, writers whose clocks disagree — and checks the
// invariants of SPEC §2.1 after every step. Rerun a failure with
// -payment.seed=<seed from the log>.
func TestApplySequenceProperties(t *testing.T) {
	r, seed := propRand(t)
	runs := *propRuns
	if runs <= 0 {
		// Apply is pure and runs on one goroutine: the race detector has
		// nothing to find here and only makes every step several times slower.
		runs = 2000
		if raceEnabled() {
			runs = 500
		}
	}
	runs = propCount(runs)
	t.Logf("%d sequences", runs)
	for i := 0; i < runs; i++ {
		steps := 1 + r.Intn(propMaxSteps)
		if r.Intn(10) == 0 {
			steps = 1 + r.Intn(propMaxLongSteps)
		}
		sc := genScenario(randChooser{r}, steps)
		if err := checkScenario(sc); err != nil {
			t.Fatalf("seed %d, sequence %d: %v\n%s", seed, i, err, sc)
		}
	}
}

// FuzzApplySequence checks the same invariants on sequences decoded from the
// fuzzer's bytes, one byte per choice. The seed corpus runs in go test.
func FuzzApplySequence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte(strings.Repeat("\xff", 64)))
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 32; i++ {
		b := make([]byte, 8+r.Intn(256))
		r.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		steps := 1
		if len(data) > 0 {
			steps += int(data[0]) % propMaxLongSteps
			data = data[1:]
		}
		sc := genScenario(&byteChooser{b: data}, steps)
		if err := checkScenario(sc); err != nil {
			t.Fatalf("%v\n%s", err, sc)
		}
	})
}

// propRand is a property test's random source: seeded with -payment.seed,
// else from the clock, and the seed logged to run a failure again.
func propRand(t *testing.T) (*rand.Rand, int64) {
	t.Helper()
	seed := *propSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -payment.seed=%d)", seed, seed)
	return rand.New(rand.NewSource(seed)), seed
}

// propCount is how many cases a property test draws: n, a tenth of n under
// -short.
func propCount(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// A chooser makes the generator's choices: from math/rand, or from fuzz input.
type chooser interface {
	// intn returns a choice in [0, n), n <= 256.
	intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.Intn(n) }

// byteChooser takes one byte per choice; once the input is used up every
// choice is 0.
type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

type propStep struct {
	obs payment.Observation
	now time.Time
}

type scenario struct {
	spec  v1alpha1.PaymentSpec
	start v1alpha1.PaymentStatus
	steps []propStep
}

func (sc scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "payment of %d %s, start %+v\n", sc.spec.Amount.Value, sc.spec.Amount.Currency, sc.start.Query)
	for i, s := range sc.steps {
		fmt.Fprintf(&b, "  %2d at %s: %s\n", i, s.now.Format(time.TimeOnly), describeObs(s.obs))
	}
	return b.String()
}

func describeObs(o payment.Observation) string {
	s := fmt.Sprintf("%s %s", o.Source, o.Observed)
	if o.EventID != "" {
		s += " id=" + o.EventID
	}
	if o.Amount != nil {
		s += fmt.Sprintf(" amount=%d %s", o.Amount.Value, o.Amount.Currency)
	}
	if o.RefundedTotal != nil {
		s += fmt.Sprintf(" refunded=%d %s", o.RefundedTotal.Value, o.RefundedTotal.Currency)
	}
	if o.Review != "" {
		s += " review=" + o.Review
	}
	if o.Local {
		s += " local"
	}
	if o.Raw != "" {
		s += " raw=" + o.Raw
	}
	return s
}

var (
	propStart   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	propAmounts = []v1alpha1.Amount{
		{Value: 1999, Currency: "USD"},
		{Value: 500, Currency: "JPY"},
		{Value: 1, Currency: "EUR"},
	}
	propSources = []v1alpha1.ObservationSource{
		v1alpha1.SourceCreate, v1alpha1.SourceWebhook, v1alpha1.SourceWebhook, v1alpha1.SourceStatusQuery,
		v1alpha1.SourceStatusQuery, v1alpha1.SourceBackfill, v1alpha1.SourceSweep,
	}
	propObserved = []payment.Observed{
		payment.ObservedPending, payment.ObservedProcessing, payment.ObservedProcessing,
		payment.ObservedSucceeded, payment.ObservedSucceeded, payment.ObservedSucceeded,
		payment.ObservedFailed, payment.ObservedExpired, payment.ObservedExpired,
		payment.ObservedRefund, payment.ObservedRefund, payment.ObservedDispute,
		payment.ObservedUnknown, payment.ObservedUnknown, payment.Observed("Chargeback"),
		payment.ObservedApproved, payment.ObservedAuthorized, payment.ObservedAuthorized, payment.ObservedCanceled,
	}
	propManual = []payment.Observed{
		payment.ObservedSucceeded, payment.ObservedFailed, payment.ObservedExpired, payment.ObservedPending, payment.ObservedCanceled,
	}
	propReviews = []string{
		"", "", v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonCreateOutcomeUnknown, v1alpha1.ReasonNonRetryableQueryError,
		v1alpha1.ReasonProviderUnreachable,
	}
	propRaws = []string{"", "", "pending", "processing", "succeeded", "COMPLETED/COMPLETED", "unknown"}
)

// genScenario draws a payment and a sequence of observations. Some come from
// a small pool of provider events, drawn with replacement, so the same news
// arrives twice and out of order; fresh ones take event ids from a small set,
// so ids repeat too.
func genScenario(c chooser, steps int) scenario {
	sc := scenario{spec: v1alpha1.PaymentSpec{
		ProviderRef: v1alpha1.LocalObjectReference{Name: "prov"},
		Amount:      propAmounts[c.intn(len(propAmounts))],
	}}
	if c.intn(2) == 0 {
		next := metav1.NewMicroTime(propStart.Add(30 * time.Second))
		sc.start.Query.NextTime = &next
	}
	if c.intn(4) == 0 {
		// A Manual payment, authorized, whose merchant asked for a capture:
		// of everything, or of part of it (SPEC §11.5).
		sc.spec.CaptureMethod = v1alpha1.CaptureManual
		a := sc.spec.Amount
		sc.start.Phase = v1alpha1.PhaseAuthorized
		sc.start.AmountAuthorized = &v1alpha1.Money{Value: a.Value, Currency: a.Currency}
		capture := a.Value
		if a.Value > 1 && c.intn(3) > 0 {
			capture = 1 + int64(c.intn(int(min(a.Value-1, 255))))
		}
		sc.start.AmountToCapture = &v1alpha1.Money{Value: capture, Currency: a.Currency}
	}
	pool := make([]payment.Observation, 1+c.intn(8))
	for i := range pool {
		pool[i] = genObservation(c, sc.spec, &sc.start)
	}
	now := propStart
	for range steps {
		// Mostly forward, sometimes back: the writers' clocks differ.
		now = now.Add(time.Duration(c.intn(70)-10)*time.Minute + time.Duration(c.intn(60))*time.Second)
		obs := genObservation(c, sc.spec, &sc.start)
		if c.intn(5) < 3 {
			obs = pool[c.intn(len(pool))]
		}
		sc.steps = append(sc.steps, propStep{obs: obs, now: now})
	}
	return sc
}

func genObservation(c chooser, spec v1alpha1.PaymentSpec, start *v1alpha1.PaymentStatus) payment.Observation {
	if c.intn(16) == 0 {
		return payment.Observation{
			Source:   v1alpha1.SourceManual,
			Observed: propManual[c.intn(len(propManual))],
			Reason:   "checked with the provider",
		}
	}
	o := payment.Observation{
		Source:     propSources[c.intn(len(propSources))],
		Observed:   propObserved[c.intn(len(propObserved))],
		Raw:        propRaws[c.intn(len(propRaws))],
		OccurredAt: propStart.Add(time.Duration(c.intn(240)) * time.Minute),
	}
	if o.Source == v1alpha1.SourceWebhook || o.Source == v1alpha1.SourceBackfill {
		// Mostly a few ids, so they repeat; sometimes one from many, so the
		// bounded dedup list overflows.
		o.EventID = fmt.Sprintf("evt-%d", c.intn(12))
		if c.intn(3) == 0 {
			o.EventID = fmt.Sprintf("evt-many-%d", c.intn(256))
		}
	}
	if c.intn(3) == 0 {
		o.ProviderPaymentID = fmt.Sprintf("pay_%d", c.intn(2))
	}
	want := spec.Amount
	switch o.Observed {
	case payment.ObservedAuthorized:
		if c.intn(4) > 0 {
			o.Amount = &v1alpha1.Money{Value: want.Value, Currency: want.Currency}
		} else {
			o.Amount = &v1alpha1.Money{Value: want.Value - 1, Currency: want.Currency}
		}
	case payment.ObservedSucceeded:
		if capture := start.AmountToCapture; capture != nil && c.intn(3) > 0 {
			// The partial capture's success is for what was captured.
			want = v1alpha1.Amount{Value: capture.Value, Currency: capture.Currency}
		}
		switch c.intn(10) {
		case 0:
			// The provider did not say how much.
		case 1:
			o.Amount = &v1alpha1.Money{Value: want.Value + 1, Currency: want.Currency}
		case 2:
			o.Amount = &v1alpha1.Money{Value: want.Value - 1, Currency: want.Currency}
		case 3:
			o.Amount = &v1alpha1.Money{Value: want.Value, Currency: otherCurrency(want.Currency)}
		default:
			o.Amount = &v1alpha1.Money{Value: want.Value, Currency: want.Currency}
		}
	case payment.ObservedRefund:
		total := &v1alpha1.Money{Currency: want.Currency}
		switch c.intn(8) {
		case 0:
			total = nil
		case 1:
			total.Currency = otherCurrency(want.Currency)
			total.Value = want.Value
		case 2:
			if capture := start.AmountToCapture; capture != nil {
				// Everything of a partial capture, or just below it.
				total.Value = capture.Value - int64(c.intn(2))
				break
			}
			fallthrough
		default:
			// Below, at and above the amount.
			total.Value = want.Value * int64(c.intn(5)) / 3
		}
		o.RefundedTotal = total
	case payment.ObservedFailed:
		if c.intn(2) == 0 {
			o.Failure = &v1alpha1.Failure{Code: "card_declined", Message: "insufficient funds"}
		}
	case payment.ObservedExpired:
		o.Local = c.intn(3) == 0
	case payment.ObservedUnknown:
		o.Review = propReviews[c.intn(len(propReviews))]
	}
	if c.intn(4) == 0 {
		o.Reason = "from the generator"
	}
	return o
}

func otherCurrency(cur string) string {
	if cur == "USD" {
		return "EUR"
	}
	return "USD"
}

// checkScenario applies the steps in order and checks every invariant after
// each one; it returns the first violation.
func checkScenario(sc scenario) error {
	p := &v1alpha1.Payment{Spec: sc.spec, Status: *sc.start.DeepCopy()}
	for i, s := range sc.steps {
		next, err := checkStep(p, s.obs, s.now)
		if err != nil {
			return fmt.Errorf("step %d (%s at %s): %w", i, describeObs(s.obs), s.now.Format(time.TimeOnly), err)
		}
		p.Status = next
	}
	return nil
}

func checkStep(p *v1alpha1.Payment, obs payment.Observation, now time.Time) (v1alpha1.PaymentStatus, error) {
	prev := p.Status.DeepCopy()
	res := payment.Apply(p, obs, now)
	next := &res.Status
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !sameStatus(prev, &p.Status) {
		fail("Apply changed its input:\n%s", diff.Diff(prev, &p.Status))
	}
	from, to := prev.Phase, next.Phase
	moved := fmt.Sprintf("%q -> %q (%s: %s)", from, to, res.Decision, res.Reason)

	// (a) A final phase never returns to Pending or Processing.
	if from.IsFinal() && (to == v1alpha1.PhasePending || to == v1alpha1.PhaseProcessing || to == "") {
		fail("a final phase went back: %s", moved)
	}

	// (b) The same observation again, at the same time, changes nothing.
	again := payment.Apply(&v1alpha1.Payment{Spec: p.Spec, Status: *next.DeepCopy()}, obs, now)
	if !sameStatus(next, &again.Status) {
		fail("the same observation twice changed the status the second time (%s):\n%s", again.Decision, diff.Diff(next, &again.Status))
	}
	if again.Decision == payment.Applied || again.Decision == payment.Conflict || again.Transition != nil || len(again.Events) > 0 {
		fail("the same observation twice: second time %s (%s) with transition %+v and %d events, want nothing",
			again.Decision, again.Reason, again.Transition, len(again.Events))
	}

	// (c) Bounded, ordered history and bounded dedup ids.
	if n := len(next.History); n > payment.MaxHistory {
		fail("history has %d entries, more than %d", n, payment.MaxHistory)
	}
	for i := 1; i < len(next.History); i++ {
		if next.History[i].Time.Before(&next.History[i-1].Time) {
			fail("history goes back in time at entry %d: %s after %s", i, next.History[i].Time, next.History[i-1].Time)
		}
	}
	if n := len(next.RecentEventIDs); n > payment.MaxRecentEventIDs {
		fail("%d recent event ids, more than %d", n, payment.MaxRecentEventIDs)
	}
	changed := res.Decision == payment.Applied || res.Decision == payment.Conflict
	grew := (len(next.History) + int(next.HistoryDropped)) - (len(prev.History) + int(prev.HistoryDropped))
	if (changed && grew != 1) || (!changed && grew != 0) {
		fail("%s recorded %d history entries", res.Decision, grew)
	}
	if changed && len(res.Events) == 0 {
		fail("%s emitted no Event", res.Decision)
	}
	if !changed && (len(res.Events) > 0 || from != to) {
		fail("%s emitted %d events and moved %s", res.Decision, len(res.Events), moved)
	}
	if res.Decision == payment.Duplicate && !sameStatus(prev, next) {
		fail("a duplicate changed the status:\n%s", diff.Diff(prev, next))
	}

	// (d) A success with the wrong amount or currency never makes a payment Succeeded.
	succeededBefore := from == v1alpha1.PhaseSucceeded || from == v1alpha1.PhasePartiallyRefunded || from == v1alpha1.PhaseRefunded
	if obs.Source != v1alpha1.SourceManual && obs.Observed == payment.ObservedSucceeded &&
		amountMismatch(obs, p.Spec, prev) && !succeededBefore && to == v1alpha1.PhaseSucceeded {
		fail("a mismatched success made the payment Succeeded: %s", moved)
	}

	// (e) Unknown leaves only on a Manual decision or an authoritative final answer.
	if from == v1alpha1.PhaseUnknown && to != v1alpha1.PhaseUnknown && !authoritative(obs, p.Spec, prev) {
		fail("left Unknown on a non-authoritative observation: %s", moved)
	}

	// (f) A reason paywarden raises itself never touches a settled payment of
	// any final phase, and never replaces what the provider did.
	prevReview := ""
	if c := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		prevReview = c.Reason
	}
	if obs.Source != v1alpha1.SourceManual && obs.Review != "" && !payment.IsHumanReason(obs.Review) {
		if from.IsFinal() && (to != from || !sameStatus(prev, next)) {
			fail("paywarden's own %s changed a %s payment: %s", obs.Review, from, moved)
		}
		if payment.IsHumanReason(prevReview) {
			if c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != prevReview {
				fail("paywarden's own %s replaced the review for %s", obs.Review, prevReview)
			}
		}
	}

	// (g) News about another provider payment than the recorded one never
	// changes the phase (SPEC §11.4): it is a possible double charge.
	recorded := prev.ProviderPaymentID
	if obs.Source != v1alpha1.SourceManual && obs.Review == "" && obs.ProviderPaymentID != "" && recorded != "" && obs.ProviderPaymentID != recorded && from != to && prev.Phase != "" {
		fail("an observation about %s moved a payment recorded as %s: %s", obs.ProviderPaymentID, recorded, moved)
	}

	// The rest of the rules that hold at every step.
	if (res.Transition != nil) != (from != to) {
		fail("transition %+v for %s", res.Transition, moved)
	} else if res.Transition != nil && (res.Transition.From != from || res.Transition.To != to) {
		fail("transition %+v for %s", res.Transition, moved)
	}
	review := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionNeedsReview)
	underReview := review != nil && review.Status == metav1.ConditionTrue
	if to == v1alpha1.PhaseUnknown && !underReview {
		fail("Unknown without NeedsReview: a payment must never be silently stuck")
	}
	if meta.IsStatusConditionTrue(prev.Conditions, v1alpha1.ConditionNeedsReview) && !underReview && obs.Source != v1alpha1.SourceManual {
		fail("NeedsReview cleared by %s, only a Manual action may clear it", obs.Source)
	}
	if wantReady := to.IsFinal() && !underReview; meta.IsStatusConditionTrue(next.Conditions, v1alpha1.ConditionReady) != wantReady {
		fail("Ready = %v for phase %q with NeedsReview %v", !wantReady, to, underReview)
	}
	if (to.IsFinal() || to == v1alpha1.PhaseUnknown) && next.Query.NextTime != nil {
		fail("phase %q with a next query time", to)
	}
	if to == v1alpha1.PhaseFailed && from != to && obs.Observed != payment.ObservedFailed {
		fail("failed by a %s observation: only the provider or an operator fails a payment", obs.Observed)
	}
	if to == v1alpha1.PhaseCanceled && from != to && obs.Observed != payment.ObservedCanceled {
		fail("canceled by a %s observation", obs.Observed)
	}
	if to == v1alpha1.PhaseAuthorized && from != to && (obs.Observed != payment.ObservedAuthorized || from.IsFinal()) {
		fail("authorized by %s from %q", obs.Observed, from)
	}
	if from.TookMoney() && to != from && obs.Source != v1alpha1.SourceManual && (to == v1alpha1.PhaseCanceled || to == v1alpha1.PhaseAuthorized) {
		fail("a payment that took money moved %s", moved)
	}
	if (to.IsFinal() || to == v1alpha1.PhaseUnknown) && next.Operation != nil && to.IsFinal() {
		fail("phase %q keeps an operation", to)
	}
	if (to == v1alpha1.PhasePartiallyRefunded || to == v1alpha1.PhaseRefunded) && from != to &&
		(obs.Observed != payment.ObservedRefund || !succeededBefore) {
		fail("refund phase reached by %s from %q", obs.Observed, from)
	}
	if next.ExpiredLocally && to != v1alpha1.PhaseExpired {
		fail("expiredLocally on phase %q", to)
	}

	// (h) Once the capture is under way, news of the authorization is stale:
	// the payment never goes back to wait for a capture already asked for.
	if prev.AmountToCapture != nil && from == v1alpha1.PhaseProcessing && to == v1alpha1.PhaseAuthorized {
		fail("back to Authorized after the capture started: %s", moved)
	}

	// (i) Refunds complete at what the payment received (a partial capture
	// received less than was ordered), not before and not only beyond it.
	if res.Decision == payment.Applied && obs.Observed == payment.ObservedRefund && next.AmountRefunded != nil {
		received := expected(p.Spec, next)
		if all := next.AmountRefunded.Value >= received.Value; all != (to == v1alpha1.PhaseRefunded) {
			fail("refunded %d of %d received ended %s", next.AmountRefunded.Value, received.Value, to)
		}
	}
	// (j) Every step is in the transition table explored from the machine
	// (AllowedTransitions, what the chaos soak checks histories against),
	// except an operator's: a resolve may settle anything under review.
	if obs.Source != v1alpha1.SourceManual {
		allowed := allowedTransitions()
		for _, h := range next.History[min(len(prev.History), len(next.History)):] {
			if !slices.Contains(allowed[h.From], h.To) {
				fail("step %q -> %q (%s) is not in AllowedTransitions: the exploration misses a rule", h.From, h.To, res.Reason)
			}
		}
	}
	return res.Status, errors.Join(errs...)
}

// allowedTransitions is payment.AllowedTransitions, explored once per test binary.
var allowedTransitions = sync.OnceValue(payment.AllowedTransitions)

// sameStatus is equality.Semantic.DeepEqual with a fast path: statuses that
// are equal field by field are semantically equal too, and comparing them
// with reflect alone keeps thousands of sequences fast under -race.
func sameStatus(a, b *v1alpha1.PaymentStatus) bool {
	return reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}

// expected is what a success must report and what the payment received:
// the amount reported with its success, else what was captured, else the
// order's amount.
func expected(spec v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) v1alpha1.Money {
	switch {
	case st.AmountReceived != nil:
		return *st.AmountReceived
	case st.AmountToCapture != nil:
		return *st.AmountToCapture
	}
	return v1alpha1.Money{Value: spec.Amount.Value, Currency: spec.Amount.Currency}
}

// amountMismatch: a success reporting another amount than the one asked for
// (the order's, or the capture's when only part was captured).
func amountMismatch(obs payment.Observation, spec v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) bool {
	a := obs.Amount
	want := v1alpha1.Money{Value: spec.Amount.Value, Currency: spec.Amount.Currency}
	if c := st.AmountToCapture; c != nil {
		want = *c
	}
	return a != nil && (a.Value != want.Value || a.Currency != want.Currency)
}

// authoritative reports whether an observation may settle a payment in Unknown:
// an operator's decision, or the provider's final answer (a success with the
// right amount, or one that did not say, a failure, its own expiry).
func authoritative(obs payment.Observation, spec v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) bool {
	if obs.Source == v1alpha1.SourceManual {
		return true
	}
	switch obs.Observed {
	case payment.ObservedSucceeded:
		return !amountMismatch(obs, spec, st)
	case payment.ObservedFailed, payment.ObservedCanceled:
		return true
	case payment.ObservedExpired:
		return !obs.Local
	}
	return false
}

// TestCallSequenceProperties runs the reconciler's loop (Plan, then the call
// it names answered at random, then After*) with every error class the
// adapters produce and errors no adapter classified (a bare error, an
// escaped context error), with capture and cancel annotations (partial,
// whole and malformed) on the way. An unclassified error is no answer: it
// never moves the phase (except to Unknown/ProviderUnreachable once nothing
// answered for Policy.MaxUnreachable), never consumes a schedule attempt and
// never records a failure. Rerun a failure with -payment.seed=<seed>.
func TestCallSequenceProperties(t *testing.T) {
	r, seed := propRand(t)
	runs := propCount(400)
	for i := 0; i < runs; i++ {
		if err := checkCallSequence(randChooser{r}, 1+r.Intn(60)); err != nil {
			t.Fatalf("seed %d, sequence %d: %v", seed, i, err)
		}
	}
}

// FuzzCallSequence checks the same on fuzzer-chosen call sequences.
func FuzzCallSequence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 7, 1, 3, 9, 9, 2, 5, 4, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{b: data}
		if err := checkCallSequence(c, 1+c.intn(60)); err != nil {
			t.Fatal(err)
		}
	})
}

var (
	propCallStatuses = []provider.Status{
		provider.StatusPending, provider.StatusProcessing, provider.StatusSucceeded, provider.StatusFailed,
		provider.StatusExpired, provider.StatusUnknown, provider.StatusApproved, provider.StatusAuthorized, provider.StatusCanceled,
	}
	propCallErrors = []error{
		errNoAnswer, errTimeout, errThrottled, errUnauthorized, errNotFound, errRefused, errUnsupported,
		errors.New("boom"), context.DeadlineExceeded, fmt.Errorf("get payment: %w", context.Canceled),
	}
	propCaptures = []string{"all", "600", "1999", "1", "6.00", "600 USD", "1e2", "600,00", "0", "5000"}
)

func unclassified(err error) bool {
	return err != nil && !errors.Is(err, provider.ErrRetryable) && !errors.Is(err, provider.ErrProviderConfig) &&
		!errors.Is(err, provider.ErrNotFound) && !errors.Is(err, provider.ErrNonRetryable) && !errors.Is(err, provider.ErrUnsupported)
}

func checkCallSequence(c chooser, steps int) error {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{Checkout: true, ManualCapture: true, PartialCapture: true, Cancel: true, Refunds: true, AuthorizeStep: c.intn(2) == 0}
	pol.LifecycleKnown = true
	p := newPay("calls")
	if c.intn(2) == 0 {
		p.Spec.CaptureMethod = v1alpha1.CaptureManual
	}
	now := t0
	fresh := false
	for i := 0; i < steps; i++ {
		switch c.intn(8) {
		case 0:
			p = annotate(p, v1alpha1.AnnotationCapture, propCaptures[c.intn(len(propCaptures))])
		case 1:
			p = annotate(p, v1alpha1.AnnotationCancel, fmt.Sprintf("reason %d", c.intn(3)))
		}
		s := payment.Plan(p, pol, payment.Facts{FreshOperation: fresh}, now)
		fresh = false
		switch s.Action {
		case payment.Nothing:
			return nil
		case payment.Wait:
			now = s.At
			continue
		case payment.Write:
			next := store(p, s.Outcome)
			fresh = next.Status.Operation != nil && (p.Status.Operation == nil || !p.Status.Operation.RequestedAt.Equal(&next.Status.Operation.RequestedAt))
			// A capture annotation handled in this write captures what it
			// says, or nothing.
			if v := next.Status.Actions.Capture; v != p.Status.Actions.Capture && p.Status.Operation == nil && next.Status.Operation != nil {
				if a := next.Status.AmountToCapture; a == nil || (v != "all" && fmt.Sprint(a.Value) != v) {
					return fmt.Errorf("step %d: capture annotation %q captures %+v", i, v, a)
				}
			}
			p = next
			continue
		}
		call := payment.Call{Err: propCallErrors[c.intn(len(propCallErrors))]}
		if c.intn(2) == 0 {
			call = answer(propCallStatuses[c.intn(len(propCallStatuses))])
		}
		out, ok := afterCall(p, pol, s, call, now)
		if !ok {
			return fmt.Errorf("step %d: Plan chose %s, which makes no call", i, s.Action)
		}
		prev, next := &p.Status, &out.Status
		if unclassified(call.Err) {
			if cl := payment.Classify(call.Err); cl != payment.NoAnswer {
				return fmt.Errorf("step %d: %v classified %s", i, call.Err, cl)
			}
			gaveUp := next.Phase == v1alpha1.PhaseUnknown && review(store(p, out)) == v1alpha1.ReasonProviderUnreachable
			if next.Phase != prev.Phase && !gaveUp {
				return fmt.Errorf("step %d: %s answered %q moved %q to %q", i, s.Action, call.Err, prev.Phase, next.Phase)
			}
			if next.Query.Attempts > prev.Query.Attempts {
				return fmt.Errorf("step %d: %s answered %q consumed an attempt (%d -> %d)", i, s.Action, call.Err, prev.Query.Attempts, next.Query.Attempts)
			}
			if next.Failure != nil && prev.Failure == nil {
				return fmt.Errorf("step %d: %s answered %q recorded a failure %+v", i, s.Action, call.Err, next.Failure)
			}
			if prev.Operation != nil && next.Operation == nil && !next.Phase.IsFinal() && !gaveUp {
				return fmt.Errorf("step %d: %s answered %q ended the %s", i, s.Action, call.Err, prev.Operation.Kind)
			}
		}
		if next.Phase.IsFinal() && next.Query.NextTime != nil {
			return fmt.Errorf("step %d: %s with a next query", i, next.Phase)
		}
		p = store(p, out)
		now = now.Add(time.Duration(c.intn(90)) * time.Second)
	}
	return nil
}

// TestRefundAllowanceProperties draws payments (whole and partial captures,
// refunds made elsewhere) and sibling Refunds in every phase — Unknown ones
// among them, sent or not, older or newer, some near int64 max — and checks
// the over-refund rule: a Refund is allowed only when, even if every sibling
// that is not Failed went through and the provider's own figure counted
// none of those in flight, the refunds add up to no more than the payment
// received. Sums are computed without overflow (math/big).
func TestRefundAllowanceProperties(t *testing.T) {
	r, seed := propRand(t)
	runs := propCount(5000)
	for i := 0; i < runs; i++ {
		if err := checkRefundAllowance(randChooser{r}); err != nil {
			t.Fatalf("seed %d, case %d: %v", seed, i, err)
		}
	}
}

// FuzzRefundAllowance checks the over-refund rule on fuzzer-chosen cases.
func FuzzRefundAllowance(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 2, 3, 5, 1, 1, 0, 1, 5, 0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkRefundAllowance(&byteChooser{b: data}); err != nil {
			t.Fatal(err)
		}
	})
}

var propRefundPhases = []v1alpha1.RefundPhase{
	"", v1alpha1.RefundPending, v1alpha1.RefundProcessing, v1alpha1.RefundSucceeded,
	v1alpha1.RefundFailed, v1alpha1.RefundUnknown, v1alpha1.RefundUnknown,
}

func propRefundAmount(c chooser, ordered int64) int64 {
	switch c.intn(10) {
	case 0:
		return math.MaxInt64 - int64(c.intn(3))
	case 1:
		return math.MaxInt64/2 + int64(c.intn(3))
	}
	return 1 + int64(c.intn(int(ordered)))
}

func checkRefundAllowance(c chooser) error {
	const ordered = 1000
	p := paidPayment(0)
	p.Spec.Amount.Value = ordered
	p.Status.AmountReceived = nil
	switch c.intn(4) {
	case 0: // a partial capture, reported with the success
		p.Status.AmountToCapture = &v1alpha1.Money{Value: 1 + int64(c.intn(ordered)), Currency: orderCurrency}
		p.Status.AmountReceived = p.Status.AmountToCapture.DeepCopy()
	case 1: // a partial capture, success without an amount
		p.Status.AmountToCapture = &v1alpha1.Money{Value: 1 + int64(c.intn(ordered)), Currency: orderCurrency}
	case 2:
		p.Status.AmountReceived = &v1alpha1.Money{Value: ordered, Currency: orderCurrency}
	}
	if c.intn(3) == 0 {
		p.Status.Phase = v1alpha1.PhasePartiallyRefunded
		p.Status.AmountRefunded = &v1alpha1.Money{Value: int64(c.intn(ordered + 1)), Currency: orderCurrency}
		if c.intn(20) == 0 {
			p.Status.AmountRefunded.Value = math.MaxInt64 - int64(c.intn(3))
		}
	}
	received := big.NewInt(ordered)
	if a := p.Status.AmountReceived; a != nil {
		received.SetInt64(a.Value)
	} else if a := p.Status.AmountToCapture; a != nil {
		received.SetInt64(a.Value)
	}

	var siblings []v1alpha1.Refund
	for j := range c.intn(4) {
		s := newRefund(fmt.Sprintf("s%d", j), propRefundAmount(c, ordered), t0.Add(time.Duration(c.intn(3))*time.Minute))
		s.Status.Phase = propRefundPhases[c.intn(len(propRefundPhases))]
		if s.Status.Phase != "" && c.intn(4) > 0 {
			s.Status.Amount = &v1alpha1.Money{Value: s.Spec.Amount.Value, Currency: orderCurrency}
			s.Status.CreateRequestedAt = ptrTime(t0)
			if c.intn(2) == 0 {
				s.Status.ProviderRefundID = "re_" + s.Name
			}
		}
		siblings = append(siblings, *s)
	}
	own := newRefund("r", 0, t0.Add(time.Minute))
	if c.intn(3) > 0 {
		own.Spec.Amount = &v1alpha1.Amount{Value: propRefundAmount(c, ordered), Currency: orderCurrency}
	}

	amount, wait, refusal := payment.RefundAllowance(own, p, siblings)
	if wait != "" || refusal != "" {
		if amount.Value != 0 {
			return fmt.Errorf("waiting %q / refused %q with an amount %d", wait, refusal, amount.Value)
		}
		return nil
	}
	// Allowed: the worst case still fits in what was received.
	worst, succeeded := new(big.Int), new(big.Int)
	older := map[string]bool{}
	for _, s := range siblings {
		if s.CreationTimestamp.Before(&own.CreationTimestamp) || (s.CreationTimestamp.Equal(&own.CreationTimestamp) && s.Name < own.Name) {
			older[s.Name] = true
		}
	}
	for _, s := range siblings {
		sent := s.Status.CreateRequestedAt != nil || s.Status.ProviderRefundID != ""
		if s.Status.Phase == v1alpha1.RefundFailed || (!sent && !older[s.Name]) {
			continue
		}
		v := big.NewInt(s.Spec.Amount.Value)
		if a := s.Status.Amount; a != nil {
			v.SetInt64(a.Value)
		}
		worst.Add(worst, v)
		if s.Status.Phase == v1alpha1.RefundSucceeded {
			succeeded.Add(succeeded, v)
		}
	}
	if a := p.Status.AmountRefunded; a != nil {
		if elsewhere := new(big.Int).Sub(big.NewInt(a.Value), succeeded); elsewhere.Sign() > 0 {
			worst.Add(worst, elsewhere)
		}
	}
	if amount.Value <= 0 || amount.Currency != orderCurrency {
		return fmt.Errorf("allowed %+v", amount)
	}
	if own.Spec.Amount != nil && amount.Value != own.Spec.Amount.Value {
		return fmt.Errorf("allowed %d for a Refund of %d", amount.Value, own.Spec.Amount.Value)
	}
	if total := worst.Add(worst, big.NewInt(amount.Value)); total.Cmp(received) > 0 {
		return fmt.Errorf("allowed %d: with its siblings %s could be refunded of %s received (payment %+v, siblings %s)",
			amount.Value, total, received, p.Status.AmountRefunded, describeRefunds(siblings))
	}
	return nil
}

func describeRefunds(rs []v1alpha1.Refund) string {
	var b strings.Builder
	for _, s := range rs {
		fmt.Fprintf(&b, "[%s %s spec %d sent %v] ", s.Name, s.Status.Phase, s.Spec.Amount.Value, s.Status.CreateRequestedAt != nil)
	}
	return b.String()
}
