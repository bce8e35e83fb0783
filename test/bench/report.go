package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints the results as one table: each figure with its parts and,
// when before is given (an earlier run, e.g. of the old main), that run's
// figure next to it.
func WriteTable(w io.Writer, r *Results, before *Results) {
	type row struct{ name, value, parts, goal, was string }
	var rows []row
	add := func(name, value, parts, goal string, was func(*Results) string) {
		x := row{name: name, value: value, parts: parts, goal: goal}
		if before != nil && was != nil {
			x.was = was(before)
		}
		rows = append(rows, x)
	}
	for i, t := range r.Throughput {
		add(fmt.Sprintf("new events/s, receiver/same writes, %d senders", t.Senders),
			fmt.Sprintf("%.2f", t.FullRatio),
			fmt.Sprintf("%.0f/s vs %.0f/s; p99 %.1f vs %.1f ms", t.ReceiverPerSec, t.FullPerSec, t.ReceiverP99Ms, t.FullP99Ms)+errNote(t.Errors),
			">= 0.9", func(b *Results) string {
				if i < len(b.Throughput) {
					return fmt.Sprintf("%.2f (%.0f/%.0f)", b.Throughput[i].FullRatio, b.Throughput[i].ReceiverPerSec, b.Throughput[i].FullPerSec)
				}
				return ""
			})
	}
	for i, t := range r.Throughput {
		add(fmt.Sprintf("new events/s, receiver/bare, %d senders", t.Senders),
			fmt.Sprintf("%.2f", t.Ratio),
			fmt.Sprintf("%.0f/s vs %.0f/s (sustained %.0f/s); p99 %.1f vs %.1f ms; API server CPU/event %.1f vs %.1f ms; vs all four writes %.2f (%.0f/s)",
				t.ReceiverPerSec, t.BarePerSec, t.ReceiverSustainedPerSec, t.ReceiverP99Ms, t.BareP99Ms, t.ReceiverCPUMs["apiserver"], t.BareCPUMs["apiserver"], t.FullRatio, t.FullPerSec)+errNote(t.Errors),
			"(info)", func(b *Results) string {
				if i < len(b.Throughput) {
					return fmt.Sprintf("%.2f (%.0f/%.0f)", b.Throughput[i].Ratio, b.Throughput[i].ReceiverPerSec, b.Throughput[i].BarePerSec)
				}
				return ""
			})
	}
	if r.Ran("receiver") {
		o := r.OpenLoop
		add("open-loop p99, receiver/same writes", fmt.Sprintf("%.2f", o.SameWritesRatio),
			fmt.Sprintf("%.1f vs %.1f ms at %.0f/s (p50 %.1f vs %.1f ms); answered after two writes, two follow", o.ReceiverP99Ms, o.SameWritesP99Ms, o.RatePerSec, o.ReceiverP50Ms, o.SameWritesP50Ms)+errNote(o.Errors),
			"<= 1.5", func(b *Results) string {
				if b.OpenLoop.SameWritesP99Ms == 0 {
					return "not measured"
				}
				return fmt.Sprintf("%.2f (%.1f/%.1f ms at %.0f/s)", b.OpenLoop.SameWritesRatio, b.OpenLoop.ReceiverP99Ms, b.OpenLoop.SameWritesP99Ms, b.OpenLoop.RatePerSec)
			})
		add("open-loop p99, receiver/bare", fmt.Sprintf("%.2f", o.Ratio),
			fmt.Sprintf("%.1f vs %.1f ms at %.0f/s (p50 %.1f vs %.1f ms)", o.ReceiverP99Ms, o.BareP99Ms, o.RatePerSec, o.ReceiverP50Ms, o.BareP50Ms)+errNote(o.Errors),
			"(info)", func(b *Results) string {
				return fmt.Sprintf("%.2f (%.1f/%.1f ms at %.0f/s)", b.OpenLoop.Ratio, b.OpenLoop.ReceiverP99Ms, b.OpenLoop.BareP99Ms, b.OpenLoop.RatePerSec)
			})
		d := r.Duplicates
		add("duplicate ack p99", fmt.Sprintf("%.1f ms", d.P99Ms), fmt.Sprintf("p50 %.1f ms, %d duplicates, %d senders", d.P50Ms, d.Events, d.Senders)+errNote(d.Errors), "",
			func(b *Results) string { return fmt.Sprintf("%.1f ms", b.Duplicates.P99Ms) })
		add("API requests per recent duplicate", fmt.Sprintf("%.2f", d.RequestsPerDuplicate),
			fmt.Sprintf("receiver %.0f requests / %d; API server saw %.0f for paywarden kinds", d.ReceiverRequests, d.Events, d.APIServerRequests), "0",
			func(b *Results) string { return fmt.Sprintf("%.2f", b.Duplicates.RequestsPerDuplicate) })
	}
	m := r.Manager
	if m.Retained > 0 {
		add(fmt.Sprintf("manager RSS per retained object (%d each)", m.Retained), fmt.Sprintf("%.1f / %.1f KiB", m.KiBPerRetainedPayment, m.KiBPerRetainedEvent),
			fmt.Sprintf("settled Payment / finished WebhookEvent; RSS empty %.0f, with payments %.0f (Go heap in use %.0f), with both %.0f MiB", m.RSSEmptyMiB, m.RSSRetainedPaymentsMiB, m.HeapRetainedPaymentsMiB, m.RSSRetainedBothMiB), "", nil)
		if m.RetainedInFlight > 0 {
			add(fmt.Sprintf("manager RSS, %d settled + %d in flight", m.Retained, m.RetainedInFlight), fmt.Sprintf("%.0f MiB", m.RSSRetainedInFlightMiB),
				fmt.Sprintf("Go heap in use %.0f MiB", m.HeapRetainedInFlightMiB), "<= 150 MiB at 100 000 + 1 000",
				func(b *Results) string { return fmt.Sprintf("%.0f MiB", b.Manager.RSSRetainedInFlightMiB) })
		}
	}
	if r.Ran("manager") {
		add(fmt.Sprintf("manager RSS, %d in flight", m.InFlightSmall), fmt.Sprintf("%.0f MiB", m.RSSSmallMiB), fmt.Sprintf("peak %.0f MiB", m.PeakSmallMiB), "",
			func(b *Results) string { return fmt.Sprintf("%.0f MiB", b.Manager.RSSSmallMiB) })
		add(fmt.Sprintf("manager RSS, %d in flight", m.InFlightLarge), fmt.Sprintf("%.0f MiB", m.RSSLargeMiB), fmt.Sprintf("peak %.0f MiB", m.PeakLargeMiB), "",
			func(b *Results) string { return fmt.Sprintf("%.0f MiB", b.Manager.RSSLargeMiB) })
		add("reconciles per provider call (backlog)", fmt.Sprintf("%.2f", m.PerCall),
			fmt.Sprintf("%.0f reconciles / %d calls; %d due at once, qps %d burst %d", m.Reconciles, m.ProviderCalls, m.InFlightLarge, m.BacklogQPS, m.BacklogBurst), "",
			func(b *Results) string { return fmt.Sprintf("%.2f", b.Manager.PerCall) })
		add("  after the initial list", fmt.Sprintf("%.2f", m.PerCallNoInit),
			fmt.Sprintf("(%.0f - %d initial) / %d calls", m.Reconciles, m.InFlightLarge, m.ProviderCalls), "<= ~1",
			func(b *Results) string { return fmt.Sprintf("%.2f", b.Manager.PerCallNoInit) })
		add("manager CPU per provider call", fmt.Sprintf("%.1f ms", m.CPUPerCallMs),
			fmt.Sprintf("%.1f CPU s / %d calls; drained in %.0f s (bucket alone: %.0f s)", m.CPUSeconds, m.ProviderCalls, m.DrainSeconds, m.IdealSeconds), "",
			func(b *Results) string { return fmt.Sprintf("%.1f ms", b.Manager.CPUPerCallMs) })
	}
	for i, h := range r.HappyPath {
		was := func(f func(HappyPath) string) func(*Results) string {
			return func(b *Results) string {
				if i < len(b.HappyPath) {
					return f(b.HappyPath[i])
				}
				return ""
			}
		}
		add(h.Case+": provider calls per payment", fmt.Sprintf("%.2f", h.CallsPerPayment),
			fmt.Sprintf("%.2f creates + %.2f queries; %d payments; settled p50 %.1f s", h.CreatesPerPayment, h.QueriesPerPayment, h.Payments, h.SettleP50Ms/1000), "",
			was(func(x HappyPath) string { return fmt.Sprintf("%.2f", x.CallsPerPayment) }))
		add(h.Case+": status writes per payment", fmt.Sprintf("%.2f", h.StatusWritesPerPayment),
			fmt.Sprintf("all API writes %.2f (WebhookEvent %.2f, Kubernetes Events %.2f)", h.WritesPerPayment, h.EventWritesPerPayment, h.KubeEventsPerPayment), "",
			was(func(x HappyPath) string {
				return fmt.Sprintf("%.2f (all %.2f)", x.StatusWritesPerPayment, x.WritesPerPayment)
			}))
	}
	if r.Ran("happy") {
		s := r.Storage
		add("bytes per Payment as stored", fmt.Sprintf("%d", s.PaymentSettled),
			fmt.Sprintf("settled (webhook first); in flight %d; full history %d; etcd growth per new payment %.0f", s.PaymentInFlight, s.PaymentFullHistory, s.EtcdPerPayment), "",
			func(b *Results) string { return fmt.Sprintf("%d", b.Storage.PaymentSettled) })
		add("bytes per WebhookEvent as stored", fmt.Sprintf("%d", s.WebhookEvent), "KukoPay payment.succeeded, result recorded", "",
			func(b *Results) string { return fmt.Sprintf("%d", b.Storage.WebhookEvent) })
	}
	if w := r.CreateWait; w.Due > 0 {
		add(fmt.Sprintf("create wait for a token, %d queries due", w.Due), fmt.Sprintf("%.1f ms", w.P50Ms),
			fmt.Sprintf("p50; max %.1f ms over %d creates; qps %d burst %d (token interval %.0f ms); one line for every call (FIFO, before issue 23): p50 %.0f ms, max %.0f ms",
				w.MaxMs, w.Creates, w.QPS, w.Burst, w.TokenIntervalMs, w.FIFOP50Ms, w.FIFOMaxMs),
			fmt.Sprintf("<= %.0f ms", w.TokenIntervalMs),
			func(b *Results) string {
				if b.CreateWait.Due == 0 {
					return "not measured"
				}
				return fmt.Sprintf("%.1f ms", b.CreateWait.P50Ms)
			})
	}
	if r.Ran("manager") {
		add("API server list of the in-flight payments", fmt.Sprintf("%.2f s", m.ListSeconds), fmt.Sprintf("%.1f MiB JSON for %d payments", m.ListMiB, m.InFlightLarge), "",
			func(b *Results) string { return fmt.Sprintf("%.2f s", b.Manager.ListSeconds) })
	}

	header := []string{"figure", "value", "parts", "target"}
	if before != nil {
		header = append(header, "before ("+before.Commit+")")
	}
	cells := [][]string{header}
	for _, x := range rows {
		c := []string{x.name, x.value, x.parts, x.goal}
		if before != nil {
			c = append(c, x.was)
		}
		cells = append(cells, c)
	}
	fmt.Fprintf(w, "paywarden bench — %s (%s), %d CPUs, %s\n\n", r.Source, r.Commit, r.CPUs, r.Duration)
	writeCells(w, cells)
	fmt.Fprintln(w)
	for _, t := range r.Targets {
		mark := "MET "
		if !t.Met {
			mark = "MISS"
		}
		fmt.Fprintf(w, "  [%s] %-55s %8.2f  (target %s)\n", mark, t.Name, t.Value, t.Goal)
	}
}

func errNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d errors)", n)
}

// writeCells prints a Markdown table with aligned columns.
func writeCells(w io.Writer, cells [][]string) {
	widths := make([]int, len(cells[0]))
	for _, r := range cells {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range r {
			fmt.Fprintf(&b, " %-*s |", widths[i], c)
		}
		fmt.Fprintln(w, b.String())
	}
	line(cells[0])
	sep := make([]string, len(widths))
	for i, n := range widths {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, r := range cells[1:] {
		line(r)
	}
}
