package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/test/harness"
)

// Figures are what the soak measured besides the invariants.
type Figures struct {
	Payments           int              `json:"payments"`
	Stories            map[string]int   `json:"stories"`
	RefundStories      map[string]int   `json:"refundStories"`
	Providers          []ProviderFigure `json:"providers"`
	Wall               string           `json:"wall"`
	SettleP50          string           `json:"settleP50"`
	SettleP95          string           `json:"settleP95"`
	SettleMax          string           `json:"settleMax"`
	LagP50             string           `json:"lagAfterDecisionP50"`
	LagP95             string           `json:"lagAfterDecisionP95"`
	LagMax             string           `json:"lagAfterDecisionMax"`
	CallsPerPayment    float64          `json:"providerCallsPerPayment"`
	AllCallsPerPayment float64          `json:"allProviderRequestsPerPayment"`
	EventsPerPayment   float64          `json:"webhookEventsPerPayment"`
	PaymentBytes       float64          `json:"bytesPerPayment"`
	EventBytes         float64          `json:"bytesPerWebhookEvent"`
	Deliveries         int              `json:"webhookDeliveries"`
	DeliveriesOK       int              `json:"webhookDeliveriesAcknowledged"`
	ManagerStarts      map[string]int   `json:"managerStarts"`
	ReceiverStarts     int              `json:"receiverStarts"`
	Handovers          int              `json:"handovers"`
	LeaseHolders       []leaderTerm     `json:"leaseHolders"`
	Kills              []kill           `json:"leaderKills"`
	CallsByManager     map[string]int   `json:"providerCallsByManager"`
	CallsUnattested    int              `json:"providerCallsUnattested"`
	WorstRateWindow    string           `json:"worstRateWindow"`
	Reapplied          int              `json:"reapplied"`
	ReapplyMetChaos    int              `json:"reappliedDuringKillOrAPIOutage"`
	ReapplyGapP50      string           `json:"reapplyDeleteToAdoptedP50"`
	ReapplyGapMax      string           `json:"reapplyDeleteToAdoptedMax"`
	RefundsReapplied   int              `json:"refundsReapplied"`
	RefundsRecreated   int              `json:"refundsRecreated"`
	OldEventsHeld      int              `json:"oldRefundWebhooksLetThroughAtRecreate"`
	RefundsReversed    int              `json:"refundsReversed"`
	RefundsStuck       int              `json:"refundsStuck"`
	OverRefunds        int              `json:"overRefundAttempts"`
	LedgerShards       int              `json:"ledgerShards"`
	ByStory            []StoryFigures   `json:"byStory"`
	PaysimCounters     paysim.Counters  `json:"paysim"`
	Chaos              []string         `json:"chaos"`
	Rows               []PaymentRow     `json:"paymentTimelines"`
}

// ProviderFigure is the money one provider type moved.
type ProviderFigure struct {
	Provider string `json:"provider"`
	Payments int    `json:"payments"`
	// Refunds are Refund objects created (re-created and re-applied ones
	// included); ProviderRefunds the refunds the provider made.
	Refunds         int     `json:"refunds"`
	ProviderRefunds int     `json:"providerRefunds"`
	Captures        int     `json:"captures"`
	Cancels         int     `json:"cancels"`
	CallsPerPayment float64 `json:"providerCallsPerPayment"`
}

// PaymentRow is one payment's timeline, in seconds since the workload began.
type PaymentRow struct {
	Name       string  `json:"name"`
	Provider   string  `json:"provider"`
	Story      string  `json:"story"`
	Refunds    string  `json:"refunds,omitempty"`
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
	AtKill    string  `json:"captureAtKill,omitempty"`
}

// StoryFigures are the settle latencies of one story.
type StoryFigures struct {
	Story    string `json:"story"`
	Payments int    `json:"payments"`
	P50      string `json:"settleP50"`
	P95      string `json:"settleP95"`
	Max      string `json:"settleMax"`
}

func (s *soak) figures(ctx context.Context, st *state, rf rateFigures) Figures {
	fig := Figures{Payments: s.n, Stories: map[string]int{}, RefundStories: map[string]int{}, Wall: time.Since(s.start).Round(time.Second).String(),
		PaysimCounters: st.counters, ManagerStarts: map[string]int{}, ReceiverStarts: len(s.st.Receiver.Starts()),
		WorstRateWindow: rf.worst, CallsByManager: rf.byManager, CallsUnattested: rf.unattested, LedgerShards: s.ledgerShards(ctx)}
	for _, m := range s.st.Managers {
		fig.ManagerStarts[m.Name] = len(m.Starts())
	}
	s.mu.Lock()
	fig.LeaseHolders = append([]leaderTerm(nil), s.leaders...)
	fig.Kills = append([]kill(nil), s.kills...)
	fig.Chaos = append([]string(nil), s.chaos...)
	s.mu.Unlock()
	fig.Handovers = max(len(fig.LeaseHolders)-1, 0)

	perProv := map[string]*ProviderFigure{}
	for _, prov := range providers {
		perProv[prov] = &ProviderFigure{Provider: prov}
	}
	var settle, lag, gaps []time.Duration
	byStory := map[Story][]time.Duration{}
	starts := s.allManagerStarts()
	for _, pl := range st.plan {
		fig.Stories[string(pl.Story)]++
		pf := perProv[pl.Provider]
		pf.Payments++
		if pl.RefundPlan != "" {
			fig.RefundStories[string(pl.RefundPlan)]++
		}
		for _, r := range pl.Refunds {
			pf.Refunds += len(r.UIDs)
			switch {
			case r.Reapply && !r.Reapplied.IsZero():
				fig.RefundsReapplied++
			case r.RecreateAmount > 0 && !r.Recreated.IsZero():
				fig.RefundsRecreated++
				fig.OldEventsHeld += r.HeldOld
			case r.Reversed && !r.ReversedAt.IsZero():
				fig.RefundsReversed++
			case r.Stuck:
				fig.RefundsStuck++
			}
			if r.Over {
				fig.OverRefunds++
			}
		}
		if v, ok := st.sim(pl); ok {
			pf.ProviderRefunds += len(v.Refunds)
			pf.Captures += st.counters.CapturesByPayment[v.ID]
			pf.Cancels += st.counters.VoidsByPayment[v.ID]
		}
		p := st.payments[pl.Name]
		if p == nil {
			continue
		}
		row := PaymentRow{Name: pl.Name, Provider: pl.Provider, Story: string(pl.Story), Refunds: string(pl.RefundPlan), Phase: string(p.Status.Phase),
			Review: reviewReason(p.Status.Conditions), Created: pl.Created.Sub(s.start).Seconds(), AtKill: pl.AtKill}
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
			if v, ok := st.byID[pl.Provider+"/"+p.Status.ProviderPaymentID]; ok {
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
	gatedCalls := 0
	for _, c := range st.calls {
		if gated(c.Path) {
			gatedCalls++
			for prov, pf := range perProv {
				if strings.HasPrefix(c.Path, "/"+prov+"/") {
					pf.CallsPerPayment++
				}
			}
		}
	}
	for _, prov := range providers {
		pf := perProv[prov]
		if pf.Payments > 0 {
			pf.CallsPerPayment /= float64(pf.Payments)
		}
		fig.Providers = append(fig.Providers, *pf)
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	fig.SettleP50, fig.SettleP95, fig.SettleMax = r(harness.Percentile(settle, 0.5)), r(harness.Percentile(settle, 0.95)), r(harness.Max(settle))
	fig.LagP50, fig.LagP95, fig.LagMax = r(harness.Percentile(lag, 0.5)), r(harness.Percentile(lag, 0.95)), r(harness.Max(lag))
	fig.ReapplyGapP50, fig.ReapplyGapMax = r(harness.Percentile(gaps, 0.5)), r(harness.Max(gaps))
	for _, x := range stories {
		ds := byStory[x.story]
		fig.ByStory = append(fig.ByStory, StoryFigures{Story: string(x.story), Payments: fig.Stories[string(x.story)],
			P50: r(harness.Percentile(ds, 0.5)), P95: r(harness.Percentile(ds, 0.95)), Max: r(harness.Max(ds))})
	}
	fig.CallsPerPayment = float64(gatedCalls) / float64(s.n)
	fig.AllCallsPerPayment = float64(len(st.calls)) / float64(s.n)
	fig.EventsPerPayment = float64(len(st.events)) / float64(s.n)
	for _, d := range st.deliveries {
		fig.Deliveries++
		if d.Status >= 200 && d.Status <= 299 {
			fig.DeliveriesOK++
		}
	}
	// Stored size: a LIST answer is the objects as etcd holds them (JSON,
	// managed fields included) plus a few bytes of envelope.
	for _, res := range []struct {
		resource string
		count    int
		dst      *float64
	}{{"payments", len(st.payments), &fig.PaymentBytes}, {"webhookevents", len(st.events), &fig.EventBytes}} {
		raw, err := s.st.CP.GetRaw(ctx, "/apis/"+v1alpha1.GroupVersion.String()+"/namespaces/"+namespace+"/"+res.resource)
		if err == nil && res.count > 0 {
			*res.dst = float64(len(raw)) / float64(res.count)
		}
	}
	return fig
}

// allManagerStarts are the start times of every manager process.
func (s *soak) allManagerStarts() []time.Time {
	var out []time.Time
	for _, m := range s.st.Managers {
		out = append(out, m.Starts()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
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

// settledAt is when the payment first reached its current settled phase (a
// payment that took money: when it first Succeeded).
func settledAt(p *v1alpha1.Payment) (time.Time, bool) {
	if !settled(p) {
		return time.Time{}, false
	}
	want := p.Status.Phase
	if want.TookMoney() {
		want = v1alpha1.PhaseSucceeded
	}
	for _, h := range p.Status.History {
		if h.To == want {
			return h.Time.Time, true
		}
	}
	return time.Time{}, false
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
	fmt.Fprintf(&b, "\n| provider | payments | Refunds (provider refunds) | captures | cancels | provider calls per payment |\n|---|---:|---:|---:|---:|---:|\n")
	for _, p := range fig.Providers {
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %.2f |\n", p.Provider, p.Payments, p.Refunds, p.ProviderRefunds, p.Captures, p.Cancels, p.CallsPerPayment)
	}
	fmt.Fprintf(&b, "\n| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| settle latency (create -> settled) p50 / p95 / max | %s / %s / %s |\n", fig.SettleP50, fig.SettleP95, fig.SettleMax)
	fmt.Fprintf(&b, "| lag after the provider decided p50 / p95 / max (succeed, fail, expire, mismatch) | %s / %s / %s |\n", fig.LagP50, fig.LagP95, fig.LagMax)
	fmt.Fprintf(&b, "| provider calls per payment (rate-limited; all requests) | %.2f; %.2f |\n", fig.CallsPerPayment, fig.AllCallsPerPayment)
	fmt.Fprintf(&b, "| provider calls by manager process (not attributed) | %v (%d) |\n", fig.CallsByManager, fig.CallsUnattested)
	fmt.Fprintf(&b, "| leader kills; Lease handovers | %d; %d |\n", len(fig.Kills), fig.Handovers)
	executed, lost := 0, 0
	for _, k := range fig.Kills {
		executed, lost = executed+len(k.Executed), lost+len(k.Lost)
	}
	fmt.Fprintf(&b, "| captures sent as the leader died: reached the provider after its death / lost with it | %d / %d |\n", executed, lost)
	fmt.Fprintf(&b, "| WebhookEvents per payment | %.2f |\n", fig.EventsPerPayment)
	fmt.Fprintf(&b, "| bytes per settled Payment / per WebhookEvent as stored | %.0f / %.0f |\n", fig.PaymentBytes, fig.EventBytes)
	fmt.Fprintf(&b, "| webhook deliveries (acknowledged) | %d (%d) |\n", fig.Deliveries, fig.DeliveriesOK)
	fmt.Fprintf(&b, "| manager / receiver starts | %v / %d |\n", fig.ManagerStarts, fig.ReceiverStarts)
	fmt.Fprintf(&b, "| busiest rate window | %s |\n", fig.WorstRateWindow)
	fmt.Fprintf(&b, "| payments deleted and re-applied (during a kill or the API server's absence) | %d (%d) |\n", fig.Reapplied, fig.ReapplyMetChaos)
	fmt.Fprintf(&b, "| re-apply: delete -> adopted p50 / max; ledger shards | %s / %s; %d |\n", fig.ReapplyGapP50, fig.ReapplyGapMax, fig.LedgerShards)
	fmt.Fprintf(&b, "| Refunds re-applied / re-created (old webhooks let through then) / reversed / stuck / over-refund attempts | %d / %d (%d) / %d / %d / %d |\n",
		fig.RefundsReapplied, fig.RefundsRecreated, fig.OldEventsHeld, fig.RefundsReversed, fig.RefundsStuck, fig.OverRefunds)
	w := fig.PaysimCounters.Webhooks
	f := fig.PaysimCounters.APIFaults
	fmt.Fprintf(&b, "| paysim faults: API 500 / 429 / slow / lost answers | %d / %d / %d / %d |\n", f.ServerErrors, f.TooManyRequests, f.Slow, f.LostResponses)
	fmt.Fprintf(&b, "| paysim webhooks: events / dropped / duplicated / reordered / delayed / exhausted | %d / %d / %d / %d / %d / %d |\n", w.Events, w.Dropped, w.Duplicated, w.Reordered, w.Delayed, w.Exhausted)
	fmt.Fprintf(&b, "\n| story | payments | settled p50 / p95 / max |\n|---|---:|---|\n")
	for _, x := range fig.ByStory {
		fmt.Fprintf(&b, "| %s | %d | %s / %s / %s |\n", x.Story, x.Payments, x.P50, x.P95, x.Max)
	}
	fmt.Fprintf(&b, "\n| refund story | payments |\n|---|---:|\n")
	var rs []string
	for k := range fig.RefundStories {
		rs = append(rs, k)
	}
	sort.Strings(rs)
	for _, k := range rs {
		fmt.Fprintf(&b, "| %s | %d |\n", k, fig.RefundStories[k])
	}
	fmt.Fprintf(&b, "\nchaos:\n")
	for _, c := range fig.Chaos {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	fmt.Print(b.String())
	s.writeResults(invs, fig)
}
