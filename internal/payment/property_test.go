package payment_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
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
	seed := *propSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -payment.seed=%d)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	runs := *propRuns
	if runs <= 0 {
		// Apply is pure and runs on one goroutine: the race detector has
		// nothing to find here and only makes every step several times slower.
		runs = 2000
		if raceEnabled() {
			runs = 500
		}
	}
	if testing.Short() {
		runs /= 10
	}
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
	pool := make([]payment.Observation, 1+c.intn(8))
	for i := range pool {
		pool[i] = genObservation(c, sc.spec)
	}
	now := propStart
	for range steps {
		// Mostly forward, sometimes back: the writers' clocks differ.
		now = now.Add(time.Duration(c.intn(70)-10)*time.Minute + time.Duration(c.intn(60))*time.Second)
		obs := genObservation(c, sc.spec)
		if c.intn(5) < 3 {
			obs = pool[c.intn(len(pool))]
		}
		sc.steps = append(sc.steps, propStep{obs: obs, now: now})
	}
	return sc
}

func genObservation(c chooser, spec v1alpha1.PaymentSpec) payment.Observation {
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
		amountMismatch(obs, p.Spec) && !succeededBefore && to == v1alpha1.PhaseSucceeded {
		fail("a mismatched success made the payment Succeeded: %s", moved)
	}

	// (e) Unknown leaves only on a Manual decision or an authoritative final answer.
	if from == v1alpha1.PhaseUnknown && to != v1alpha1.PhaseUnknown && !authoritative(obs, p.Spec) {
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
	return res.Status, errors.Join(errs...)
}

// sameStatus is equality.Semantic.DeepEqual with a fast path: statuses that
// are equal field by field are semantically equal too, and comparing them
// with reflect alone keeps thousands of sequences fast under -race.
func sameStatus(a, b *v1alpha1.PaymentStatus) bool {
	return reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}

func amountMismatch(obs payment.Observation, spec v1alpha1.PaymentSpec) bool {
	a := obs.Amount
	return a != nil && (a.Value != spec.Amount.Value || a.Currency != spec.Amount.Currency)
}

// authoritative reports whether an observation may settle a payment in Unknown:
// an operator's decision, or the provider's final answer (a success with the
// right amount, or one that did not say, a failure, its own expiry).
func authoritative(obs payment.Observation, spec v1alpha1.PaymentSpec) bool {
	if obs.Source == v1alpha1.SourceManual {
		return true
	}
	switch obs.Observed {
	case payment.ObservedSucceeded:
		return !amountMismatch(obs, spec)
	case payment.ObservedFailed, payment.ObservedCanceled:
		return true
	case payment.ObservedExpired:
		return !obs.Local
	}
	return false
}
