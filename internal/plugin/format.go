package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Output formats of the reports (stuck, why, summary): text, a wider text,
// or the report itself as JSON or YAML for scripts.
const (
	OutputText = ""
	OutputWide = "wide"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

func validOutput(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	var names []string
	for _, a := range allowed {
		if a != OutputText {
			names = append(names, a)
		}
	}
	return fmt.Errorf("unsupported output %q: use %s", o, strings.Join(names, ", "))
}

// WriteData writes a report as JSON or YAML.
func WriteData(w io.Writer, output string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if output == OutputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// stamp is how every report shows a point in time: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// relative says how far t is from now, the way kubectl shows ages: "in 5m"
// or "48m ago".
func relative(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + duration.HumanDuration(d)
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

// at is a point in time with its distance from now: "2026-03-01T10:00:00Z (in 5m)".
func at(t, now time.Time) string {
	return stamp(t) + " (" + relative(t, now) + ")"
}

// ref names a payment the way the report's reader asked for it: with its
// namespace when they listed every namespace.
func ref(namespace, name string, allNamespaces bool) string {
	if allNamespaces {
		return namespace + "/" + name
	}
	return name
}

// Command lines a report suggests. They always carry -n, so they can be
// copied from any report into any shell.
func cmdLine(verb, namespace, name string, args ...string) string {
	parts := append([]string{"kubectl", "paywarden", verb, name, "-n", namespace}, args...)
	return strings.Join(parts, " ")
}

func resolveCmd(p *v1alpha1.Payment) string {
	return cmdLine("resolve", p.Namespace, p.Name, "--phase", "Succeeded|Failed", `--reason "..."`)
}

func requeryCmd(p *v1alpha1.Payment) string { return cmdLine("requery", p.Namespace, p.Name) }

func whyCmd(p *v1alpha1.Payment) string { return cmdLine("why", p.Namespace, p.Name) }

func captureCmd(p *v1alpha1.Payment) string { return cmdLine("capture", p.Namespace, p.Name) }

func cancelCmd(p *v1alpha1.Payment) string {
	return cmdLine("cancel", p.Namespace, p.Name, `--reason "..."`)
}

func providerCmd(p *v1alpha1.Payment) string {
	return "kubectl describe paymentprovider " + p.Spec.ProviderRef.Name + " -n " + p.Namespace
}

// amount is the payment's Amount column, or the order when the manager has
// not written it yet.
func amount(p *v1alpha1.Payment) string {
	if p.Status.AmountDisplay != "" {
		return p.Status.AmountDisplay
	}
	return v1alpha1.FormatAmount(p.Spec.Amount.Value, p.Spec.Amount.Currency)
}

// phase is the payment's phase; one the manager has not written yet shows as New.
func phase(p *v1alpha1.Payment) string {
	if p.Status.Phase == "" {
		return "New"
	}
	return string(p.Status.Phase)
}

func money(m *v1alpha1.Money) string {
	if m == nil {
		return ""
	}
	return v1alpha1.FormatAmount(m.Value, m.Currency)
}
