package controllers_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/paysim"
)

// The gauges count closed payments, which the manager's cache does not
// hold, from the thin cache's counts, and open ones (with their reviews)
// from the manager's cache: each once. A closed payment deleted leaves the
// count.
func TestTheGaugesCountClosedPaymentsOnce(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "closed-gauges")
	kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	var settled []*v1alpha1.Payment
	for _, name := range []string{"first", "third"} {
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: name, Provider: "kukopay", MerchantReference: "ORD-" + name, Outcome: paysim.OutcomeSucceed, After: "1s"})
		if got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second); !got.Status.Closed {
			t.Fatalf("%s settled open: %+v", name, got.Status)
		}
		settled = append(settled, p)
	}
	// Open, under review: the order of a closed payment applied again.
	time.Sleep(1100 * time.Millisecond) // creation times have second precision
	dup := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", MerchantReference: "ORD-first"})
	fixture.WaitPhase(t, env.Client, dup, v1alpha1.PhaseUnknown, 20*time.Second)

	reg := prometheus.NewRegistry()
	reg.MustRegister(controllers.PaymentCollector{Reader: paymentcache.Counting{Reader: m.Manager.GetCache(), Thin: m.PaymentCache}})
	gauges := func() (payments map[string]float64, reviews map[string]float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		payments, reviews = map[string]float64{}, map[string]float64{}
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range s.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] != ns {
					continue
				}
				switch mf.GetName() {
				case "paywarden_payments":
					payments[labels["provider"]+"/"+labels["phase"]] = s.GetGauge().GetValue()
				case "paywarden_payments_needs_review":
					reviews[labels["reason"]] = s.GetGauge().GetValue()
				}
			}
		}
		return payments, reviews
	}
	fixture.Eventually(t, 10*time.Second, "the gauges to count 2 settled and 1 under review", func() (bool, string) {
		p, r := gauges()
		return len(p) == 2 && p["kukopay/Succeeded"] == 2 && p["kukopay/Unknown"] == 1 && len(r) == 1 && r[v1alpha1.ReasonDuplicatePayment] == 1,
			"payments " + fmtGauges(p) + ", reviews " + fmtGauges(r)
	})

	if err := env.Client.Delete(context.Background(), settled[1]); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 20*time.Second, "a deleted closed payment to leave the count", func() (bool, string) {
		p, _ := gauges()
		return p["kukopay/Succeeded"] == 1 && p["kukopay/Unknown"] == 1, "payments " + fmtGauges(p)
	})
}

func fmtGauges(g map[string]float64) string {
	out := "{"
	for k, v := range g {
		out += k + "=" + strconv.FormatFloat(v, 'f', -1, 64) + " "
	}
	return out + "}"
}
