package plugin

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// Kinds of timeline entries, in the order entries of the same time are shown.
const (
	EntryHistory = "history"
	EntryEvent   = "event"
	EntryWebhook = "webhook"
	EntryRefund  = "refund"
	EntryNext    = "next"
)

var entryOrder = map[string]int{EntryHistory: 0, EntryRefund: 1, EntryWebhook: 2, EntryEvent: 3, EntryNext: 4}

// Entry is one line of a payment's timeline.
type Entry struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
}

// WhyInput is what why reads about one payment: the payment, the Kubernetes
// Events about it and its Refunds, the WebhookEvents of its namespace and
// its Refunds.
type WhyInput struct {
	Payment       *v1alpha1.Payment
	Events        []eventsv1.Event
	WebhookEvents []v1alpha1.WebhookEvent
	Refunds       []v1alpha1.Refund
}

// WhyReport is a payment's merged timeline and what happens next.
type WhyReport struct {
	Namespace         string  `json:"namespace"`
	Name              string  `json:"name"`
	Phase             string  `json:"phase"`
	Amount            string  `json:"amount"`
	Refunded          string  `json:"refunded,omitempty"`
	Provider          string  `json:"provider"`
	ProviderPaymentID string  `json:"providerPaymentID,omitempty"`
	ProviderStatus    string  `json:"providerStatus,omitempty"`
	WaitingFor        string  `json:"waitingFor,omitempty"`
	HistoryDropped    int32   `json:"historyDropped,omitempty"`
	Timeline          []Entry `json:"timeline"`
	// Next says what paywarden will do next and when, or what a human must
	// decide; Command acts on it when there is something to do.
	Next       string `json:"next"`
	Command    string `json:"command,omitempty"`
	NeedsHuman bool   `json:"needsHuman"`
}

// Why merges everything known about a payment into one timeline, oldest
// first, and closes with what comes next.
func Why(in WhyInput, now time.Time) WhyReport {
	p := in.Payment
	st := &p.Status
	r := WhyReport{
		Namespace: p.Namespace, Name: p.Name, Phase: phase(p), Amount: amount(p), Refunded: st.AmountRefundedDisplay,
		Provider: p.Spec.ProviderRef.Name, ProviderPaymentID: st.ProviderPaymentID, ProviderStatus: st.ProviderStatus,
		WaitingFor: st.WaitingFor, HistoryDropped: st.HistoryDropped,
	}
	var tl []Entry
	for _, h := range st.History {
		tl = append(tl, Entry{Time: h.Time.Time, Kind: EntryHistory, Text: historyText(h)})
	}
	refundHistory := map[string][]v1alpha1.HistoryEntry{}
	for i := range in.Refunds {
		rf := &in.Refunds[i]
		refundHistory[rf.Name] = rf.Status.History
		tl = append(tl, refundEntries(rf, now)...)
	}
	for i := range in.Events {
		e := &in.Events[i]
		history := st.History
		if e.Regarding.Kind == "Refund" {
			history = refundHistory[e.Regarding.Name]
		} else if about, _, ok := strings.Cut(e.Note, ": "); ok && strings.HasPrefix(about, "Refund ") {
			// A settled Refund's change, also recorded on its payment.
			if h, ok := refundHistory[strings.TrimPrefix(about, "Refund ")]; ok {
				history = h
			}
		}
		t := eventTime(e)
		if repeatsHistory(e, t, history) {
			continue
		}
		tl = append(tl, Entry{Time: t, Kind: EntryEvent, Text: eventText(e)})
	}
	for _, we := range matchWebhookEvents(p, in.Refunds, in.WebhookEvents) {
		tl = append(tl, Entry{Time: we.Spec.ReceivedAt.Time, Kind: EntryWebhook, Text: webhookText(&we)})
	}
	tl = append(tl, nextEntries(p, in.Refunds)...)
	sort.SliceStable(tl, func(i, j int) bool {
		if !tl[i].Time.Equal(tl[j].Time) {
			return tl[i].Time.Before(tl[j].Time)
		}
		return entryOrder[tl[i].Kind] < entryOrder[tl[j].Kind]
	})
	r.Timeline = tl
	r.Next, r.Command, r.NeedsHuman = closing(p, in.Refunds, now)
	return r
}

func historyText(h v1alpha1.HistoryEntry) string {
	from := string(h.From)
	if from == "" {
		from = "New"
	}
	s := fmt.Sprintf("%s -> %s via %s", from, h.To, h.Source)
	if h.EventID != "" {
		s += " (" + h.EventID + ")"
	}
	if h.Reason != "" {
		s += ": " + h.Reason
	}
	return s
}

func refundEntries(rf *v1alpha1.Refund, now time.Time) []Entry {
	label := rf.Name
	switch {
	case rf.Status.AmountDisplay != "":
		label += " (" + rf.Status.AmountDisplay + ")"
	case rf.Spec.Amount != nil:
		label += " (" + v1alpha1.FormatAmount(rf.Spec.Amount.Value, rf.Spec.Amount.Currency) + ")"
	default:
		label += " (all still refundable)"
	}
	if len(rf.Status.History) == 0 {
		s := label + " asked"
		if rf.Status.WaitingFor != "" {
			s += ", waiting for " + rf.Status.WaitingFor
		}
		return []Entry{{Time: rf.CreationTimestamp.Time, Kind: EntryRefund, Text: s}}
	}
	var out []Entry
	for _, h := range rf.Status.History {
		out = append(out, Entry{Time: h.Time.Time, Kind: EntryRefund, Text: label + ": " + historyText(h)})
	}
	if f := rf.Status.Failure; f != nil && rf.Status.Phase == v1alpha1.RefundFailed {
		last := &out[len(out)-1]
		if !strings.Contains(last.Text, f.Message) {
			last.Text += " (" + strings.TrimPrefix(f.Code+": "+f.Message, ": ") + ")"
		}
	}
	return out
}

// eventTime is when an Event happened, for Events of either API.
func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedFirstTimestamp.IsZero():
		return e.DeprecatedFirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func eventText(e *eventsv1.Event) string {
	s := e.Type + " " + e.Reason + ": " + e.Note
	if e.Regarding.Kind == "Refund" {
		s = "refund " + e.Regarding.Name + ": " + s
	}
	switch {
	case e.Series != nil && e.Series.Count > 1:
		s += fmt.Sprintf(" (%d times, last %s)", e.Series.Count, stamp(e.Series.LastObservedTime.Time))
	case e.DeprecatedCount > 1:
		s += fmt.Sprintf(" (%d times, last %s)", e.DeprecatedCount, stamp(e.DeprecatedLastTimestamp.Time))
	}
	return s
}

// repeatsHistory reports whether e is the Event paywarden records with a
// history entry ("Pending -> Succeeded via Webhook: ..."): the timeline
// shows that change once.
func repeatsHistory(e *eventsv1.Event, t time.Time, history []v1alpha1.HistoryEntry) bool {
	for _, h := range history {
		d := t.Sub(h.Time.Time)
		if strings.HasSuffix(e.Reason, string(h.To)) && strings.Contains(e.Note, "-> "+string(h.To)+" via "+string(h.Source)) &&
			d > -time.Second && d < time.Minute {
			return true
		}
	}
	return false
}

// matchWebhookEvents are the inbox events about the payment or one of its
// Refunds: matched at receipt, or naming its provider ids, its merchant
// reference or a Refund's reference.
func matchWebhookEvents(p *v1alpha1.Payment, refunds []v1alpha1.Refund, all []v1alpha1.WebhookEvent) []v1alpha1.WebhookEvent {
	ids := map[string]bool{}
	for _, id := range []string{p.Status.ProviderPaymentID, p.Status.CheckoutID, p.Spec.ProviderPaymentID} {
		if id != "" {
			ids[id] = true
		}
	}
	refundIDs, refundRefs := map[string]bool{}, map[string]bool{}
	for _, rf := range refunds {
		if rf.Status.ProviderRefundID != "" {
			refundIDs[rf.Status.ProviderRefundID] = true
		}
		refundRefs[rf.Reference()] = true
	}
	var out []v1alpha1.WebhookEvent
	for _, we := range all {
		s := &we.Spec
		if we.Namespace != p.Namespace || s.Provider != p.Spec.ProviderRef.Name && s.Payment != p.Name {
			continue
		}
		if s.Payment == p.Name || ids[s.ProviderPaymentID] || s.MerchantReference != "" && s.MerchantReference == p.MerchantRef() ||
			refundIDs[s.ProviderRefundID] || refundRefs[s.RefundReference] {
			out = append(out, we)
		}
	}
	return out
}

func webhookText(we *v1alpha1.WebhookEvent) string {
	s := we.Spec.Type
	if s == "" {
		s = "event"
	}
	s += " " + we.Spec.EventID + " via " + string(we.Spec.Via) + ": "
	res := string(we.Status.Result)
	if res == "" {
		res = "not processed yet"
	}
	s += res
	if m := we.Status.Message; m != "" {
		s += " (" + m + ")"
	}
	return s
}

// nextEntries are what is scheduled: the next status query, the retry of a
// call, the end of the payer's link or of the authorization, and the next
// query of a Refund in flight.
func nextEntries(p *v1alpha1.Payment, refunds []v1alpha1.Refund) []Entry {
	st := &p.Status
	var out []Entry
	if n := st.Query.NextTime; n != nil {
		text := fmt.Sprintf("status query %d", st.Query.Attempts+1)
		if st.Phase == v1alpha1.PhaseAuthorized && p.Spec.ManualCapture() {
			text = "status query (for a void or an expiry at the provider)"
		}
		out = append(out, Entry{Time: n.Time, Kind: EntryNext, Text: text})
	}
	if op := st.Operation; op != nil && op.RetryAt != nil {
		out = append(out, Entry{Time: op.RetryAt.Time, Kind: EntryNext, Text: strings.ToLower(string(op.Kind)) + " looked up, then retried with the same idempotency key"})
	}
	if a := st.CustomerAction; a != nil && a.ExpiresAt != nil {
		out = append(out, Entry{Time: a.ExpiresAt.Time, Kind: EntryNext, Text: "the payer's link expires"})
	}
	if e := st.AuthorizationExpiresAt; e != nil && st.Phase == v1alpha1.PhaseAuthorized {
		out = append(out, Entry{Time: e.Time, Kind: EntryNext, Text: "the authorization expires uncaptured"})
	}
	for _, rf := range refunds {
		if n := rf.Status.Query.NextTime; n != nil && !rf.Status.Phase.IsFinal() {
			out = append(out, Entry{Time: n.Time, Kind: EntryNext, Text: "refund " + rf.Name + ": status query"})
		}
	}
	return out
}

// closing says what paywarden will do next and when, or what a human must
// decide, with the command that acts on it.
func closing(p *v1alpha1.Payment, refunds []v1alpha1.Refund, now time.Time) (next, command string, human bool) {
	st := &p.Status
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		if gaveUp(c.Reason) {
			return fmt.Sprintf("A human must decide: paywarden stopped asking (%s: %s). Requery once the provider can answer, or resolve it with what the provider's dashboard shows.", c.Reason, c.Message), requeryCmd(p), true
		}
		return fmt.Sprintf("A human must decide: %s: %s. Resolve it with what the provider's dashboard shows.", c.Reason, c.Message), resolveCmd(p), true
	}
	for _, rf := range refunds {
		if rf.Status.Phase == v1alpha1.RefundUnknown {
			return fmt.Sprintf("A human must decide: refund %s is Unknown (docs/runbook-refund-unknown.md).", rf.Name), "kubectl describe refund " + rf.Name + " -n " + p.Namespace, true
		}
	}
	switch {
	case st.Phase == "":
		return fmt.Sprintf("Not taken up yet: the manager creates it at PaymentProvider %s when it runs and the provider exists.", p.Spec.ProviderRef.Name), "", false
	case st.Phase.IsFinal():
		for _, rf := range refunds {
			if !rf.Status.Phase.IsFinal() {
				return fmt.Sprintf("Settled %s; paywarden follows refund %s (%s) to its final phase.", st.Phase, rf.Name, refundPhase(&rf)), "", false
			}
		}
		return fmt.Sprintf("Settled %s. paywarden does nothing more unless the provider reports a refund or a dispute.", st.Phase), "", false
	case st.Operation != nil:
		s := fmt.Sprintf("paywarden is calling the provider to %s", strings.ToLower(string(st.Operation.Kind)))
		if r := st.Operation.RetryAt; r != nil {
			s += "; it looks the outcome up and retries " + at(r.Time, now)
		}
		return s + ".", "", false
	case st.Query.LastErrorClass == "ProviderConfig":
		return fmt.Sprintf("paywarden waits until PaymentProvider %s is fixed: %s", p.Spec.ProviderRef.Name, st.Query.LastError), providerCmd(p), true
	case st.Phase == v1alpha1.PhaseAuthorized && p.Spec.ManualCapture():
		auth := payment.AuthorizedAmount(p)
		s := fmt.Sprintf("paywarden waits for your capture of up to %s, or a cancel", v1alpha1.FormatAmount(auth.Value, auth.Currency))
		if e := st.AuthorizationExpiresAt; e != nil {
			s += "; the authorization expires " + at(e.Time, now)
		}
		return s + ".", captureCmd(p), false
	}
	var s string
	switch {
	case st.CustomerAction != nil:
		s = "paywarden waits for the payer at " + st.CustomerAction.URL
		if e := st.CustomerAction.ExpiresAt; e != nil {
			s += " (until " + stamp(e.Time) + ")"
		}
		s += "; "
	case st.Query.UnansweredSince != nil:
		s = "The provider has not answered since " + stamp(st.Query.UnansweredSince.Time)
		if e := st.Query.LastError; e != "" {
			s += " (" + e + ")"
		}
		s += "; "
	}
	if n := st.Query.NextTime; n != nil {
		if s == "" {
			return "paywarden queries the provider " + at(n.Time, now) + ".", "", false
		}
		return s + "it queries the provider " + at(n.Time, now) + ".", "", false
	}
	return s + "nothing is scheduled; a requery asks the provider now.", requeryCmd(p), false
}

func refundPhase(rf *v1alpha1.Refund) string {
	if rf.Status.Phase == "" {
		return "New"
	}
	s := string(rf.Status.Phase)
	if rf.Status.WaitingFor != "" {
		s += ", waiting for " + rf.Status.WaitingFor
	}
	return s
}

// WriteWhy writes the report as text.
func WriteWhy(w io.Writer, r WhyReport, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Payment %s/%s: %s, %s at %s", r.Namespace, r.Name, r.Phase, r.Amount, r.Provider)
	var about []string
	if r.ProviderPaymentID != "" {
		about = append(about, "provider id "+r.ProviderPaymentID)
	}
	if r.ProviderStatus != "" {
		about = append(about, "status "+r.ProviderStatus)
	}
	if r.Refunded != "" {
		about = append(about, "refunded "+r.Refunded)
	}
	if r.WaitingFor != "" {
		about = append(about, "waiting for "+r.WaitingFor)
	}
	if len(about) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
	}
	b.WriteString("\n\n")
	if r.HistoryDropped > 0 {
		fmt.Fprintf(&b, "(%d older history entries were dropped)\n", r.HistoryDropped)
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, e := range r.Timeline {
		t := stamp(e.Time)
		if e.Kind == EntryNext {
			t = at(e.Time, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t, e.Kind, e.Text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n", r.Next)
	if r.Command != "" {
		fmt.Fprintf(&b, "  $ %s\n", r.Command)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
