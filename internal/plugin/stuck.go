package plugin

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// Wait is why a payment waits, in the order stuck lists them: what needs a
// human first, then what waits for the merchant or the payer, then what
// paywarden is still working on.
type Wait string

// Reasons a payment waits.
const (
	WaitReview      Wait = "Review"
	WaitCapture     Wait = "Capture"
	WaitPayer       Wait = "Payer"
	WaitConfig      Wait = "ProviderConfig"
	WaitUnreachable Wait = "ProviderUnreachable"
	WaitCall        Wait = "Call"
	WaitProvider    Wait = "Provider"
	WaitNew         Wait = "New"
)

var waitOrder = []Wait{WaitReview, WaitConfig, WaitCapture, WaitPayer, WaitUnreachable, WaitCall, WaitProvider, WaitNew}

// reviewReasons says in a line what each NeedsReview reason means.
var reviewReasons = map[string]string{
	v1alpha1.ReasonAmountMismatch:         "the provider reported another amount paid than the order",
	v1alpha1.ReasonCaptureRefused:         "the provider refused the automatic capture of an approved payment",
	v1alpha1.ReasonConflictingStatus:      "the provider contradicted a final phase",
	v1alpha1.ReasonCreateOutcomeUnknown:   "a create whose outcome could not be found",
	v1alpha1.ReasonDisputeLost:            "the payer won a dispute and the provider took the money back",
	v1alpha1.ReasonDuplicatePayment:       "another payment for the same order (a possible double charge)",
	v1alpha1.ReasonLateSuccess:            "paid after paywarden closed it out as unpaid",
	v1alpha1.ReasonNonRetryableQueryError: "the provider refuses the status query; asking again cannot help",
	v1alpha1.ReasonProviderUnreachable:    "no answer at all from the provider for statusQuery.maxUnreachable",
	v1alpha1.ReasonRetriesExhausted:       "no final answer after the whole status-query schedule",
}

// gaveUp are the reasons paywarden raises itself when it stops asking: a
// requery (once the provider answers again) takes the payment back into
// automatic handling. The others report something the provider did that a
// human judges and settles with a resolve.
func gaveUp(reason string) bool {
	switch reason {
	case v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonProviderUnreachable,
		v1alpha1.ReasonNonRetryableQueryError, v1alpha1.ReasonCreateOutcomeUnknown:
		return true
	}
	return false
}

// StuckItem is one payment that waits, with the one command that acts on it.
type StuckItem struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Amount    string `json:"amount"`
	Provider  string `json:"provider"`
	// Since is when it began to wait for this.
	Since time.Time `json:"since"`
	// Detail says what it waits for: the review's message, the payer's
	// link, the authorization, the provider's last error.
	Detail  string `json:"detail,omitempty"`
	Command string `json:"command"`

	// What -o wide adds.
	ProviderPaymentID string     `json:"providerPaymentID,omitempty"`
	Queries           int32      `json:"queries,omitempty"`
	LastQuery         *time.Time `json:"lastQuery,omitempty"`
	NextQuery         *time.Time `json:"nextQuery,omitempty"`
	LastError         string     `json:"lastError,omitempty"`
	LastErrorClass    string     `json:"lastErrorClass,omitempty"`
}

// StuckGroup is the payments that wait for the same thing, oldest first.
type StuckGroup struct {
	Wait Wait `json:"wait"`
	// Reason is the NeedsReview reason of a review group.
	Reason string `json:"reason,omitempty"`
	Title  string `json:"title"`
	// Description says what the reason means.
	Description string      `json:"description,omitempty"`
	NeedsHuman  bool        `json:"needsHuman"`
	Payments    []StuckItem `json:"payments"`
}

// StuckReport is every payment not settled, or settled but waiting for a
// human, grouped by why it waits.
type StuckReport struct {
	Groups []StuckGroup `json:"groups"`
	// NeedsHuman counts the payments under review or whose provider refuses
	// paywarden's configuration: stuck exits 1 when there is any.
	NeedsHuman int `json:"needsHuman"`
	Total      int `json:"total"`
}

// Stuck groups the payments that wait, leaving out those settled without a
// review and those that began to wait less than olderThan before now.
func Stuck(payments []v1alpha1.Payment, now time.Time, olderThan time.Duration) StuckReport {
	groups := map[string]*StuckGroup{}
	for i := range payments {
		p := &payments[i]
		item, g, ok := classify(p, now)
		if !ok || now.Sub(item.Since) < olderThan {
			continue
		}
		key := string(g.Wait) + "/" + g.Reason
		if groups[key] == nil {
			groups[key] = &g
		}
		groups[key].Payments = append(groups[key].Payments, item)
	}
	var r StuckReport
	for _, g := range groups {
		sort.Slice(g.Payments, func(i, j int) bool {
			a, b := g.Payments[i], g.Payments[j]
			if !a.Since.Equal(b.Since) {
				return a.Since.Before(b.Since)
			}
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		})
		r.Groups = append(r.Groups, *g)
		r.Total += len(g.Payments)
		if g.NeedsHuman {
			r.NeedsHuman += len(g.Payments)
		}
	}
	rank := map[Wait]int{}
	for i, w := range waitOrder {
		rank[w] = i
	}
	sort.Slice(r.Groups, func(i, j int) bool {
		a, b := r.Groups[i], r.Groups[j]
		if a.Wait != b.Wait {
			return rank[a.Wait] < rank[b.Wait]
		}
		return a.Reason < b.Reason
	})
	return r
}

// classify says why p waits; ok is false for a payment settled without a
// review.
func classify(p *v1alpha1.Payment, now time.Time) (StuckItem, StuckGroup, bool) {
	st := &p.Status
	item := StuckItem{
		Namespace: p.Namespace, Name: p.Name, Phase: phase(p), Amount: amount(p), Provider: p.Spec.ProviderRef.Name,
		Since: lastChange(p), ProviderPaymentID: st.ProviderPaymentID, Queries: st.Query.Attempts,
		LastError: st.Query.LastError, LastErrorClass: st.Query.LastErrorClass,
	}
	if l := st.Query.LastTime; l != nil {
		item.LastQuery = &l.Time
	}
	if n := st.Query.NextTime; n != nil {
		item.NextQuery = &n.Time
	}
	review := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview)
	if review != nil && review.Status != metav1.ConditionTrue {
		review = nil
	}
	if review == nil && st.Phase == v1alpha1.PhaseUnknown {
		// Unknown is a human's to settle even without its condition.
		review = &metav1.Condition{Reason: "Unknown", Message: "phase Unknown without a NeedsReview condition"}
	}
	switch {
	case review != nil:
		if !review.LastTransitionTime.IsZero() {
			item.Since = review.LastTransitionTime.Time
		}
		item.Detail, item.Command = review.Message, resolveCmd(p)
		if gaveUp(review.Reason) {
			item.Command = requeryCmd(p)
		}
		return item, StuckGroup{Wait: WaitReview, Reason: review.Reason, Title: "Needs review: " + review.Reason,
			Description: reviewReasons[review.Reason], NeedsHuman: true}, true
	case st.Phase.IsFinal():
		return item, StuckGroup{}, false
	case st.Phase == "":
		item.Since = p.CreationTimestamp.Time
		item.Detail = "the manager has not taken it up yet; is PaymentProvider " + p.Spec.ProviderRef.Name + " there, and the manager running?"
		item.Command = whyCmd(p)
		return item, StuckGroup{Wait: WaitNew, Title: "Not taken up by the manager yet"}, true
	case st.Query.LastErrorClass == "ProviderConfig":
		// Before a call in progress or a capture awaited: a call the
		// provider refuses for its configuration waits for a human.
		item.Detail = "the provider refuses paywarden's configuration: " + st.Query.LastError
		item.Command = providerCmd(p)
		return item, StuckGroup{Wait: WaitConfig, Title: "Provider refuses paywarden's configuration",
			Description: "its payments wait until the PaymentProvider's credentials or URL are fixed", NeedsHuman: true}, true
	case st.Operation != nil:
		op := st.Operation
		item.Since = op.RequestedAt.Time
		item.Detail = operationDetail(op, now)
		item.Command = whyCmd(p)
		return item, StuckGroup{Wait: WaitCall, Title: "Provider call in progress",
			Description: "an authorize, capture or cancel without an answer yet; its outcome is looked up before it is repeated"}, true
	case st.Phase == v1alpha1.PhaseAuthorized && p.Spec.ManualCapture():
		auth := payment.AuthorizedAmount(p)
		item.Detail = "authorized " + v1alpha1.FormatAmount(auth.Value, auth.Currency)
		if e := st.AuthorizationExpiresAt; e != nil {
			item.Detail += " until " + at(e.Time, now)
		}
		item.Command = captureCmd(p)
		return item, StuckGroup{Wait: WaitCapture, Title: "Waiting for a capture",
			Description: "captureMethod Manual: capture all or part, or cancel, before the authorization expires"}, true
	case st.Query.UnansweredSince != nil:
		item.Since = st.Query.UnansweredSince.Time
		item.Detail = "no answer since " + stamp(item.Since)
		if e := st.Query.LastError; e != "" {
			item.Detail += ": " + e
		}
		if n := st.Query.NextTime; n != nil {
			item.Detail += "; next query " + at(n.Time, now)
		}
		item.Command = requeryCmd(p)
		return item, StuckGroup{Wait: WaitUnreachable, Title: "Provider unreachable",
			Description: "paywarden keeps asking; after statusQuery.maxUnreachable it gives up (ProviderUnreachable)"}, true
	case st.CustomerAction != nil:
		item.Detail = "payer link " + st.CustomerAction.URL
		if e := st.CustomerAction.ExpiresAt; e != nil {
			item.Detail += ", valid until " + at(e.Time, now)
		}
		item.Command = cancelCmd(p)
		return item, StuckGroup{Wait: WaitPayer, Title: "Waiting for the payer",
			Description: "the payer approves at the provider's link; unpaid ones are closed out after spec.expiresAfter"}, true
	}
	item.Detail = providerDetail(p, now)
	item.Command = requeryCmd(p)
	return item, StuckGroup{Wait: WaitProvider, Title: "Waiting for the provider's final answer",
		Description: "paywarden queries the provider on its schedule"}, true
}

// lastChange is when the payment last changed phase (its last history
// entry), or its creation.
func lastChange(p *v1alpha1.Payment) time.Time {
	if h := p.Status.History; len(h) > 0 {
		return h[len(h)-1].Time.Time
	}
	return p.CreationTimestamp.Time
}

func operationDetail(op *v1alpha1.Operation, now time.Time) string {
	d := strings.ToLower(string(op.Kind))
	if op.Amount != nil {
		d += " of " + money(op.Amount)
	}
	d += " requested " + stamp(op.RequestedAt.Time)
	if op.Attempts > 0 {
		d += fmt.Sprintf(", %d call(s) without an answer", op.Attempts)
	}
	if r := op.RetryAt; r != nil {
		d += ", looked up and retried " + at(r.Time, now)
	}
	return d
}

func providerDetail(p *v1alpha1.Payment, now time.Time) string {
	st := &p.Status
	var parts []string
	if st.ProviderStatus != "" {
		parts = append(parts, "provider status "+st.ProviderStatus)
	}
	if e := st.Query.LastError; e != "" {
		parts = append(parts, "last error: "+e)
	}
	if n := st.Query.NextTime; n != nil {
		parts = append(parts, fmt.Sprintf("query %d %s", st.Query.Attempts+1, at(n.Time, now)))
	} else {
		parts = append(parts, "no query scheduled")
	}
	return strings.Join(parts, "; ")
}

// wideLines are what -o wide adds under a payment.
func wideLines(it StuckItem, now time.Time) []string {
	id := it.ProviderPaymentID
	if id == "" {
		id = "-"
	}
	line := fmt.Sprintf("provider id %s, %d queries", id, it.Queries)
	if l := it.LastQuery; l != nil {
		line += ", last " + stamp(*l)
	}
	if n := it.NextQuery; n != nil {
		line += ", next " + at(*n, now)
	}
	out := []string{line}
	if e := it.LastError; e != "" {
		out = append(out, "last error ("+it.LastErrorClass+"): "+e)
	}
	return out
}

// WriteStuck writes the report as text: one block per reason, each payment
// with what it waits for and the command that acts on it.
func WriteStuck(w io.Writer, r StuckReport, now time.Time, allNamespaces, wide bool) error {
	var b strings.Builder
	if r.Total == 0 {
		b.WriteString("No payment waits.\n")
	}
	for i, g := range r.Groups {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (%d)", g.Title, len(g.Payments))
		if g.Description != "" {
			fmt.Fprintf(&b, ": %s", g.Description)
		}
		b.WriteString("\n")
		for _, it := range g.Payments {
			fmt.Fprintf(&b, "  %s  %s  %s  %s  waiting since %s\n", ref(it.Namespace, it.Name, allNamespaces), it.Phase, it.Amount, it.Provider, at(it.Since, now))
			if it.Detail != "" {
				fmt.Fprintf(&b, "      %s\n", it.Detail)
			}
			if wide {
				for _, l := range wideLines(it, now) {
					fmt.Fprintf(&b, "      %s\n", l)
				}
			}
			fmt.Fprintf(&b, "    $ %s\n", it.Command)
		}
	}
	if r.Total > 0 {
		waiting := fmt.Sprintf("%d payments waiting", r.Total)
		if r.Total == 1 {
			waiting = "1 payment waiting"
		}
		humans := "none"
		if r.NeedsHuman > 0 {
			humans = fmt.Sprintf("%d of them", r.NeedsHuman)
		}
		fmt.Fprintf(&b, "\n%s, %s for a human.\n", waiting, humans)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
