package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/ledger"
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

// Figures are what the soak measured besides the invariants.
type Figures struct {
	Payments           int             `json:"payments"`
	Stories            map[string]int  `json:"stories"`
	Wall               string          `json:"wall"`
	SettleP50          string          `json:"settleP50"`
	SettleP95          string          `json:"settleP95"`
	SettleMax          string          `json:"settleMax"`
	LagP50             string          `json:"lagAfterDecisionP50"`
	LagP95             string          `json:"lagAfterDecisionP95"`
	LagMax             string          `json:"lagAfterDecisionMax"`
	CallsPerPayment    float64         `json:"providerCallsPerPayment"`
	AllCallsPerPayment float64         `json:"allProviderRequestsPerPayment"`
	EventsPerPayment   float64         `json:"webhookEventsPerPayment"`
	PaymentBytes       float64         `json:"bytesPerPayment"`
	EventBytes         float64         `json:"bytesPerWebhookEvent"`
	Deliveries         int             `json:"webhookDeliveries"`
	DeliveriesOK       int             `json:"webhookDeliveriesAcknowledged"`
	ManagerStarts      int             `json:"managerStarts"`
	ReceiverStarts     int             `json:"receiverStarts"`
	WorstRateWindow    string          `json:"worstRateWindow"`
	Reapplied          int             `json:"reapplied"`
	ReapplyMetChaos    int             `json:"reappliedDuringKillOrAPIOutage"`
	ReapplyGapP50      string          `json:"reapplyDeleteToAdoptedP50"`
	ReapplyGapMax      string          `json:"reapplyDeleteToAdoptedMax"`
	LedgerShards       int             `json:"ledgerShards"`
	ByStory            []StoryFigures  `json:"byStory"`
	PaysimCounters     paysim.Counters `json:"paysim"`
	Chaos              []string        `json:"chaos"`
	Rows               []PaymentRow    `json:"paymentTimelines"`
}

// PaymentRow is one payment's timeline, in seconds since the workload began.
type PaymentRow struct {
	Name       string  `json:"name"`
	Provider   string  `json:"provider"`
	Story      string  `json:"story"`
	Phase      string  `json:"phase"`
	Review     string  `json:"review,omitempty"`
	Created    float64 `json:"created"`
	AtProvider float64 `json:"createdAtProvider"`
	Settled    float64 `json:"settled"`
	// Lag is settled - (created at provider + scripted delay): how long
	// paywarden took after the provider decided (history times are whole
	// seconds).
	Lag float64 `json:"lag,omitempty"`
	// Deleted and Reapplied are set for a re-applied payment (its Settled
	// and Lag are its first object's).
	Deleted   float64 `json:"deleted,omitempty"`
	Reapplied float64 `json:"reapplied,omitempty"`
}

// StoryFigures are the settle latencies of one story.
type StoryFigures struct {
	Story    string `json:"story"`
	Payments int    `json:"paymentTimelines"`
	P50      string `json:"settleP50"`
	P95      string `json:"settleP95"`
	Max      string `json:"settleMax"`
}

// check gathers what paywarden and paysim ended with and checks every
// invariant; a violation names the payment and shows its history.
func (s *soak) check(ctx context.Context) {
	t := s.t
	// Deliveries first: every one acknowledged in this snapshot was stored
	// before its answer, so it is in the lists read after it.
	deliveries := s.hookRec.Calls()
	calls := s.provRec.Calls()
	c := s.st.CP.Client
	var ps v1alpha1.PaymentList
	var evs v1alpha1.WebhookEventList
	if err := c.List(ctx, &ps, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &evs, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	sims := map[string]map[string][]paysim.PaymentView{} // provider -> merchant ref -> payments
	simByID := map[string]paysim.PaymentView{}
	for _, prov := range providers {
		views, err := s.st.Sim.Payments(ctx, prov)
		if err != nil {
			t.Fatal(err)
		}
		sims[prov] = map[string][]paysim.PaymentView{}
		for _, v := range views {
			sims[prov][v.MerchantReference] = append(sims[prov][v.MerchantReference], v)
			simByID[prov+"/"+v.ID] = v
		}
	}
	counters, err := s.st.Sim.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*v1alpha1.Payment{}
	for i := range ps.Items {
		objs[ps.Items[i].Name] = &ps.Items[i]
	}
	s.mu.Lock()
	plan := append([]*planned(nil), s.payments...)
	s.mu.Unlock()

	var (
		oneCharge  = &invariant{Name: "no merchant reference charged twice (paysim payments per reference <= 1)"}
		agrees     = &invariant{Name: "phase and review reason agree with the provider's decision"}
		noFailed   = &invariant{Name: "no Failed without a provider failure"}
		legal      = &invariant{Name: "every history step is legal"}
		noSchedule = &invariant{Name: "no settled payment keeps query.nextTime"}
		storedOnce = &invariant{Name: "every delivered webhook event stored exactly once"}
		finished   = &invariant{Name: "every stored event finished (not Pending or Orphaned)"}
		rate       = &invariant{Name: fmt.Sprintf("provider calls within the rate limit (burst %d + %d/s * t)", burst, qps)}
		adopted    = &invariant{Name: "every re-applied Payment adopts its first object's outcome, nothing created (adoptedAt, phase, provider id)"}
	)
	history := func(p *v1alpha1.Payment) string {
		if p == nil {
			return "(no Payment object)"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "phase %s, review %q, provider id %q, query %s", p.Status.Phase, reviewReason(p), p.Status.ProviderPaymentID, toJSON(p.Status.Query))
		for _, h := range p.Status.History {
			fmt.Fprintf(&b, "\n      %s %s -> %s via %s %s %s", h.Time.Format("15:04:05"), orEmpty(h.From), h.To, h.Source, h.EventID, h.Reason)
		}
		return b.String()
	}

	for _, pl := range plan {
		p := objs[pl.Name]
		// One charge per order.
		oneCharge.Checked++
		if got := sims[pl.Provider][pl.Name]; len(got) > 1 {
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
		// The outcome is the provider's.
		agrees.Checked++
		wantPhase, wantReview := pl.expected()
		if p.Status.Phase != wantPhase || reviewReason(p) != wantReview {
			agrees.fail("%s (%s, %s): want %s %q, got %s %q\n    %s", pl.Name, pl.Provider, pl.Story, wantPhase, wantReview, p.Status.Phase, reviewReason(p), history(p))
		}
		if p.Status.Phase == v1alpha1.PhaseFailed {
			noFailed.Checked++
			v, ok := simByID[pl.Provider+"/"+p.Status.ProviderPaymentID]
			if !ok || v.State != "failed" {
				noFailed.fail("%s (%s): Failed, provider says %q\n    %s", pl.Name, pl.Provider, v.State, history(p))
			}
		}
		legal.Checked++
		if why := illegalStep(p); why != "" {
			legal.fail("%s (%s): %s\n    %s", pl.Name, pl.Provider, why, history(p))
		}
		if pl.Reapply {
			// Deleted once settled and applied again: the new object must
			// have taken the first one's outcome from the ledger, not from a
			// create of its own.
			adopted.Checked++
			first := pl.First
			switch {
			case pl.ReapplyErr != "":
				adopted.fail("%s (%s, %s): %s\n    %s", pl.Name, pl.Provider, pl.Story, pl.ReapplyErr, history(p))
			case p.UID == first.UID:
				adopted.fail("%s (%s): re-applied, but the object is still the first one (uid %s)\n    %s", pl.Name, pl.Provider, p.UID, history(p))
			case p.Status.Phase != first.Status.Phase || p.Status.ProviderPaymentID != first.Status.ProviderPaymentID ||
				p.Status.CreateRequestedAt != nil || p.Status.AdoptedAt == nil || !fromLedger(p):
				adopted.fail("%s (%s, %s): re-applied %.1fs after its delete; first object %s with provider id %q, the new one %s with provider id %q, adoptedAt %v, history from the ledger %v, create requested %v\n    %s",
					pl.Name, pl.Provider, pl.Story, pl.Reapplied.Sub(pl.Deleted).Seconds(), first.Status.Phase, first.Status.ProviderPaymentID,
					p.Status.Phase, p.Status.ProviderPaymentID, p.Status.AdoptedAt, fromLedger(p), p.Status.CreateRequestedAt, history(p))
			}
		}
		if settled(p) {
			noSchedule.Checked++
			if p.Status.Query.NextTime != nil {
				noSchedule.fail("%s (%s): %s with query.nextTime %s\n    %s", pl.Name, pl.Provider, p.Status.Phase, p.Status.Query.NextTime, history(p))
			}
		}
	}

	// Stored exactly once.
	stored := map[string]int{}
	for _, e := range evs.Items {
		stored[e.Spec.Provider+"/"+e.Spec.EventID]++
		finished.Checked++
		if !e.Status.Result.IsDone() || e.Status.Result == v1alpha1.ResultOrphaned {
			finished.fail("%s (event %s of %s for %s): %s %s", e.Name, e.Spec.EventID, e.Spec.Provider, e.Spec.Payment, e.Status.Result, e.Status.Message)
		}
	}
	delivered := map[string]bool{}
	ok2xx := 0
	for _, d := range deliveries {
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
	if len(deliveries) > 0 && ok2xx == 0 {
		// A receiver that refuses everything would pass the rest vacuously.
		storedOnce.fail("none of %d webhook deliveries was acknowledged: the receiver refused them all (see its log)", len(deliveries))
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

	// The token bucket, per provider and per manager lifetime (a restarted
	// manager starts with a full bucket).
	starts := s.st.Manager.Starts()
	worst := ""
	worstExcess := -1e9
	for _, prov := range providers {
		var ts []time.Time
		for _, cl := range calls {
			if strings.HasPrefix(cl.Path, "/"+prov+"/") && gated(cl.Path) {
				ts = append(ts, cl.At)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for seg := range starts {
			from, to := starts[seg], time.Now().Add(time.Hour)
			if seg+1 < len(starts) {
				to = starts[seg+1]
			}
			var part []time.Time
			for _, x := range ts {
				if !x.Before(from) && x.Before(to) {
					part = append(part, x)
				}
			}
			rate.Checked += len(part)
			excess, count, span := worstWindow(part, qps)
			if excess > worstExcess {
				worstExcess = excess
				worst = fmt.Sprintf("%s: %d calls in %.2fs (allowed %.1f)", prov, count, span.Seconds(), burst+qps*span.Seconds())
			}
			if excess > burst+1 {
				rate.fail("%s, manager start %d: %d calls in %.2fs, more than burst %d + %d/s", prov, seg+1, count, span.Seconds(), burst, qps)
			}
		}
	}

	// Figures.
	fig := Figures{Payments: s.n, Stories: map[string]int{}, Wall: time.Since(s.start).Round(time.Second).String(),
		PaysimCounters: counters, ManagerStarts: len(starts), ReceiverStarts: len(s.st.Receiver.Starts()), WorstRateWindow: worst,
	}
	var settle, lag, gaps []time.Duration
	byStory := map[Story][]time.Duration{}
	for _, pl := range plan {
		fig.Stories[string(pl.Story)]++
		p := objs[pl.Name]
		if p == nil {
			continue
		}
		row := PaymentRow{Name: pl.Name, Provider: pl.Provider, Story: string(pl.Story), Phase: string(p.Status.Phase), Review: reviewReason(p),
			Created: pl.Created.Sub(s.start).Seconds()}
		if pl.First != nil && !pl.Reapplied.IsZero() {
			// Latency and lag are the first object's: the new one only
			// adopted what it had found.
			row.Deleted, row.Reapplied = pl.Deleted.Sub(s.start).Seconds(), pl.Reapplied.Sub(s.start).Seconds()
			fig.Reapplied++
			end := pl.Reapplied
			if p.Status.AdoptedAt != nil && p.Status.AdoptedAt.After(end) {
				end = p.Status.AdoptedAt.Time
			}
			gaps = append(gaps, end.Sub(pl.Deleted))
			if metChaos(pl.Deleted, end, starts, s.apiDown) {
				fig.ReapplyMetChaos++
			}
			p = pl.First
		}
		if at, ok := settledAt(p); ok {
			d := at.Sub(pl.Created)
			settle = append(settle, d)
			byStory[pl.Story] = append(byStory[pl.Story], d)
			row.Settled = at.Sub(s.start).Seconds()
			// The provider decided its scripted delay after it created the
			// payment (paysim's clock is real time).
			if v, ok := simByID[pl.Provider+"/"+p.Status.ProviderPaymentID]; ok {
				row.AtProvider = v.Created.Sub(s.start).Seconds()
				switch pl.Story {
				case Succeed, Fail, Expire, Mismatch:
					l := at.Sub(v.Created.Add(pl.Delay))
					lag = append(lag, max(l, 0))
					row.Lag = l.Seconds()
				}
			}
		}
		fig.Rows = append(fig.Rows, row)
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	fig.SettleP50, fig.SettleP95, fig.SettleMax = r(harness.Percentile(settle, 0.5)), r(harness.Percentile(settle, 0.95)), r(harness.Max(settle))
	fig.LagP50, fig.LagP95, fig.LagMax = r(harness.Percentile(lag, 0.5)), r(harness.Percentile(lag, 0.95)), r(harness.Max(lag))
	fig.ReapplyGapP50, fig.ReapplyGapMax = r(harness.Percentile(gaps, 0.5)), r(harness.Max(gaps))
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(harness.SystemNamespace)); err == nil {
		for _, cm := range cms.Items {
			if strings.HasPrefix(cm.Name, ledger.ShardPrefix) {
				fig.LedgerShards++
			}
		}
	}
	for _, x := range stories {
		ds := byStory[x.story]
		fig.ByStory = append(fig.ByStory, StoryFigures{Story: string(x.story), Payments: fig.Stories[string(x.story)],
			P50: r(harness.Percentile(ds, 0.5)), P95: r(harness.Percentile(ds, 0.95)), Max: r(harness.Max(ds))})
	}
	gatedCalls := 0
	for _, cl := range calls {
		if gated(cl.Path) {
			gatedCalls++
		}
	}
	fig.CallsPerPayment = float64(gatedCalls) / float64(s.n)
	fig.AllCallsPerPayment = float64(len(calls)) / float64(s.n)
	fig.EventsPerPayment = float64(len(evs.Items)) / float64(s.n)
	fig.Deliveries, fig.DeliveriesOK = len(deliveries), ok2xx
	// Stored size: a LIST answer is the objects as etcd holds them (JSON,
	// managed fields included) plus a few bytes of envelope.
	for _, res := range []struct {
		resource string
		count    int
		dst      *float64
	}{{"payments", len(ps.Items), &fig.PaymentBytes}, {"webhookevents", len(evs.Items), &fig.EventBytes}} {
		raw, err := s.st.CP.GetRaw(ctx, "/apis/"+v1alpha1.GroupVersion.String()+"/namespaces/"+namespace+"/"+res.resource)
		if err == nil && res.count > 0 {
			*res.dst = float64(len(raw)) / float64(res.count)
		}
	}
	s.mu.Lock()
	fig.Chaos = append([]string(nil), s.chaos...)
	s.mu.Unlock()

	invs := []*invariant{oneCharge, agrees, noFailed, legal, noSchedule, storedOnce, finished, rate, adopted}
	s.report(invs, fig)
	for _, iv := range invs {
		for i, v := range iv.Violations {
			if i == 10 {
				t.Errorf("%s: %d more violations (see %s)", iv.Name, len(iv.Violations)-10, filepath.Join(s.dir, "..", "results.json"))
				break
			}
			t.Errorf("%s: %s", iv.Name, v)
		}
	}
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

// fromLedger reports whether the payment's history has a step taken from the
// ledger (an adoption).
func fromLedger(p *v1alpha1.Payment) bool {
	for _, h := range p.Status.History {
		if h.Source == v1alpha1.SourceLedger {
			return true
		}
	}
	return false
}

// metChaos reports whether [from, to] saw a manager start (after a kill:
// the supervisor restarts it 1 s later) or overlapped the API server's
// absence.
func metChaos(from, to time.Time, starts []time.Time, down []window) bool {
	for _, st := range starts {
		if st.After(from) && !st.After(to.Add(time.Second)) {
			return true
		}
	}
	for _, w := range down {
		if w.from.Before(to) && w.to.After(from) {
			return true
		}
	}
	return false
}

// settledAt is when the payment first reached its current settled phase.
func settledAt(p *v1alpha1.Payment) (time.Time, bool) {
	if !settled(p) {
		return time.Time{}, false
	}
	for _, h := range p.Status.History {
		if h.To == p.Status.Phase {
			return h.Time.Time, true
		}
	}
	return time.Time{}, false
}

// legalSteps are the phase changes the state machine may make without an
// operator (docs/state-machine.md). A step to the same phase records a
// conflict, a dispute or an approval.
var legalSteps = map[v1alpha1.PaymentPhase][]v1alpha1.PaymentPhase{
	"":                              {v1alpha1.PhasePending, v1alpha1.PhaseProcessing, v1alpha1.PhaseAuthorized, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled, v1alpha1.PhaseUnknown},
	v1alpha1.PhasePending:           {v1alpha1.PhasePending, v1alpha1.PhaseProcessing, v1alpha1.PhaseAuthorized, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled, v1alpha1.PhaseUnknown},
	v1alpha1.PhaseProcessing:        {v1alpha1.PhaseProcessing, v1alpha1.PhaseAuthorized, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled, v1alpha1.PhaseUnknown},
	v1alpha1.PhaseAuthorized:        {v1alpha1.PhaseAuthorized, v1alpha1.PhaseProcessing, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled, v1alpha1.PhaseUnknown},
	v1alpha1.PhaseUnknown:           {v1alpha1.PhaseUnknown, v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled},
	v1alpha1.PhaseSucceeded:         {v1alpha1.PhaseSucceeded, v1alpha1.PhasePartiallyRefunded, v1alpha1.PhaseRefunded},
	v1alpha1.PhasePartiallyRefunded: {v1alpha1.PhasePartiallyRefunded, v1alpha1.PhaseRefunded},
	v1alpha1.PhaseRefunded:          {v1alpha1.PhaseRefunded},
	v1alpha1.PhaseFailed:            {v1alpha1.PhaseFailed},
	v1alpha1.PhaseCanceled:          {v1alpha1.PhaseCanceled},
	// A local close-out followed by a payment is a late success.
	v1alpha1.PhaseExpired: {v1alpha1.PhaseExpired, v1alpha1.PhaseSucceeded},
}

// illegalStep explains the first step of the history the state machine may
// not make, or returns "".
func illegalStep(p *v1alpha1.Payment) string {
	prev, known := v1alpha1.PaymentPhase(""), p.Status.HistoryDropped == 0
	for i, h := range p.Status.History {
		if known && h.From != prev {
			return fmt.Sprintf("step %d starts from %q, the previous step ended in %q", i+1, h.From, prev)
		}
		ok := false
		for _, to := range legalSteps[h.From] {
			ok = ok || to == h.To
		}
		if !ok {
			return fmt.Sprintf("step %d: %s -> %s is not a transition the state machine makes", i+1, orEmpty(h.From), h.To)
		}
		if h.From == v1alpha1.PhaseExpired && h.To == v1alpha1.PhaseSucceeded && !strings.HasPrefix(h.Reason, v1alpha1.ReasonLateSuccess) {
			return fmt.Sprintf("step %d: Expired -> Succeeded without %s", i+1, v1alpha1.ReasonLateSuccess)
		}
		if h.To == v1alpha1.PhaseFailed && h.From != v1alpha1.PhaseFailed {
			switch {
			case h.Source == v1alpha1.SourceCreate, h.Source == v1alpha1.SourceWebhook, h.Source == v1alpha1.SourceStatusQuery, h.Source == v1alpha1.SourceBackfill:
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

func orEmpty(p v1alpha1.PaymentPhase) string {
	if p == "" {
		return "(new)"
	}
	return string(p)
}

// report prints the invariant table and the figures, and writes both as JSON
// next to the run directory.
func (s *soak) report(invs []*invariant, fig Figures) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos soak: %d payments, wall %s\n\n", fig.Payments, fig.Wall)
	fmt.Fprintf(&b, "| invariant | checked | violations |\n|---|---:|---:|\n")
	for _, iv := range invs {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", iv.Name, iv.Checked, len(iv.Violations))
	}
	fmt.Fprintf(&b, "\n| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| settle latency (create -> settled) p50 / p95 / max | %s / %s / %s |\n", fig.SettleP50, fig.SettleP95, fig.SettleMax)
	fmt.Fprintf(&b, "| lag after the provider decided p50 / p95 / max (succeed, fail, expire, mismatch) | %s / %s / %s |\n", fig.LagP50, fig.LagP95, fig.LagMax)
	fmt.Fprintf(&b, "| provider calls per payment (rate-limited; all requests) | %.2f; %.2f |\n", fig.CallsPerPayment, fig.AllCallsPerPayment)
	fmt.Fprintf(&b, "| WebhookEvents per payment | %.2f |\n", fig.EventsPerPayment)
	fmt.Fprintf(&b, "| bytes per settled Payment / per WebhookEvent as stored | %.0f / %.0f |\n", fig.PaymentBytes, fig.EventBytes)
	fmt.Fprintf(&b, "| webhook deliveries (acknowledged) | %d (%d) |\n", fig.Deliveries, fig.DeliveriesOK)
	fmt.Fprintf(&b, "| manager / receiver starts | %d / %d |\n", fig.ManagerStarts, fig.ReceiverStarts)
	fmt.Fprintf(&b, "| busiest rate window | %s |\n", fig.WorstRateWindow)
	fmt.Fprintf(&b, "| payments deleted and re-applied (during a kill or the API server's absence) | %d (%d) |\n", fig.Reapplied, fig.ReapplyMetChaos)
	fmt.Fprintf(&b, "| re-apply: delete -> adopted p50 / max; ledger shards | %s / %s; %d |\n", fig.ReapplyGapP50, fig.ReapplyGapMax, fig.LedgerShards)
	w := fig.PaysimCounters.Webhooks
	f := fig.PaysimCounters.APIFaults
	fmt.Fprintf(&b, "| paysim faults: API 500 / 429 / slow / lost answers | %d / %d / %d / %d |\n", f.ServerErrors, f.TooManyRequests, f.Slow, f.LostResponses)
	fmt.Fprintf(&b, "| paysim webhooks: events / dropped / duplicated / reordered / delayed / exhausted | %d / %d / %d / %d / %d / %d |\n", w.Events, w.Dropped, w.Duplicated, w.Reordered, w.Delayed, w.Exhausted)
	fmt.Fprintf(&b, "\n| story | payments | settled p50 / p95 / max |\n|---|---:|---|\n")
	for _, x := range fig.ByStory {
		fmt.Fprintf(&b, "| %s | %d | %s / %s / %s |\n", x.Story, x.Payments, x.P50, x.P95, x.Max)
	}
	fmt.Fprintf(&b, "\nchaos:\n")
	for _, c := range fig.Chaos {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Print(b.String())
	out := struct {
		Invariants []*invariant `json:"invariants"`
		Figures    Figures      `json:"figures"`
	}{invs, fig}
	if data, err := json.MarshalIndent(out, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(s.dir, "..", "results.json"), data, 0o644)
	}
}
