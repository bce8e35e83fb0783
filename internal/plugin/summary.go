package plugin

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// phaseOrder is the order of summary rows: Unknown first (a human's), then
// the phases a payment moves through, then the other endings.
var phaseOrder = []string{
	string(v1alpha1.PhaseUnknown), "New", string(v1alpha1.PhasePending), string(v1alpha1.PhaseProcessing),
	string(v1alpha1.PhaseAuthorized), string(v1alpha1.PhaseSucceeded), string(v1alpha1.PhasePartiallyRefunded),
	string(v1alpha1.PhaseRefunded), string(v1alpha1.PhaseFailed), string(v1alpha1.PhaseExpired), string(v1alpha1.PhaseCanceled),
}

// SummaryRow counts the payments of one phase, provider and currency (and
// namespace, with -o wide), with their amounts in minor units: ordered,
// received and refunded.
type SummaryRow struct {
	Phase     string `json:"phase"`
	Namespace string `json:"namespace,omitempty"`
	Provider  string `json:"provider,omitempty"`
	Currency  string `json:"currency"`
	Payments  int    `json:"payments"`
	// NeedsReview counts those with NeedsReview=True (whatever their phase).
	NeedsReview int   `json:"needsReview"`
	Amount      int64 `json:"amount"`
	Received    int64 `json:"received"`
	Refunded    int64 `json:"refunded"`
	// Overflow: a sum went beyond int64 minor units and is not shown.
	Overflow bool `json:"overflow,omitempty"`
}

// SummaryReport is the rows, Unknown first, and a total per currency.
type SummaryReport struct {
	Rows   []SummaryRow `json:"rows"`
	Totals []SummaryRow `json:"totals"`
}

// Summarize counts payments per phase, provider and currency; byNamespace
// splits the rows per namespace too.
func Summarize(payments []v1alpha1.Payment, byNamespace bool) SummaryReport {
	rows, totals := map[string]*SummaryRow{}, map[string]*SummaryRow{}
	for i := range payments {
		p := &payments[i]
		row := SummaryRow{Phase: phase(p), Provider: p.Spec.ProviderRef.Name, Currency: p.Spec.Amount.Currency}
		if byNamespace {
			row.Namespace = p.Namespace
		}
		key := strings.Join([]string{row.Phase, row.Namespace, row.Provider, row.Currency}, "/")
		if rows[key] == nil {
			rows[key] = &row
		}
		if totals[row.Currency] == nil {
			totals[row.Currency] = &SummaryRow{Phase: "Total", Currency: row.Currency}
		}
		for _, r := range []*SummaryRow{rows[key], totals[row.Currency]} {
			add(r, p)
		}
	}
	var r SummaryReport
	for _, row := range rows {
		r.Rows = append(r.Rows, *row)
	}
	for _, row := range totals {
		r.Totals = append(r.Totals, *row)
	}
	rank := map[string]int{}
	for i, ph := range phaseOrder {
		rank[ph] = i + 1
	}
	sort.Slice(r.Rows, func(i, j int) bool {
		a, b := r.Rows[i], r.Rows[j]
		if a.Phase != b.Phase {
			return rank[a.Phase] < rank[b.Phase]
		}
		return a.Namespace+"/"+a.Provider+"/"+a.Currency < b.Namespace+"/"+b.Provider+"/"+b.Currency
	})
	sort.Slice(r.Totals, func(i, j int) bool { return r.Totals[i].Currency < r.Totals[j].Currency })
	return r
}

func add(r *SummaryRow, p *v1alpha1.Payment) {
	st := &p.Status
	r.Payments++
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		r.NeedsReview++
	}
	sum := func(total *int64, v int64) {
		if v < 0 || *total > math.MaxInt64-v {
			r.Overflow = true
			return
		}
		*total += v
	}
	sum(&r.Amount, p.Spec.Amount.Value)
	if a := st.AmountReceived; a != nil && a.Currency == r.Currency {
		sum(&r.Received, a.Value)
	}
	if a := st.AmountRefunded; a != nil && a.Currency == r.Currency {
		sum(&r.Refunded, a.Value)
	}
}

// major shows minor units in the currency's major units, without the code
// (the row has a CURRENCY column); zero shows as "-".
func major(v int64, currency string) string {
	if v == 0 {
		return "-"
	}
	return strings.TrimSuffix(v1alpha1.FormatAmount(v, currency), " "+currency)
}

// WriteSummary writes the report as a table.
func WriteSummary(w io.Writer, r SummaryReport, byNamespace bool) error {
	if len(r.Rows) == 0 {
		_, err := io.WriteString(w, "No payments.\n")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "PHASE\tPROVIDER\tCURRENCY\tPAYMENTS\tNEEDS-REVIEW\tAMOUNT\tRECEIVED\tREFUNDED"
	if byNamespace {
		head = "PHASE\tNAMESPACE\tPROVIDER\tCURRENCY\tPAYMENTS\tNEEDS-REVIEW\tAMOUNT\tRECEIVED\tREFUNDED"
	}
	fmt.Fprintln(tw, head)
	line := func(row SummaryRow, provider string) {
		amounts := major(row.Amount, row.Currency) + "\t" + major(row.Received, row.Currency) + "\t" + major(row.Refunded, row.Currency)
		if row.Overflow {
			amounts = "overflow\toverflow\toverflow"
		}
		if byNamespace {
			ns := row.Namespace
			if provider == "*" {
				ns = "*"
			}
			provider = ns + "\t" + provider
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", row.Phase, provider, row.Currency, row.Payments, row.NeedsReview, amounts)
	}
	for _, row := range r.Rows {
		line(row, row.Provider)
	}
	for _, row := range r.Totals {
		line(row, "*")
	}
	return tw.Flush()
}
