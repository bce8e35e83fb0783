package bench

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/test/harness"
)

const happyNS = "bench-happy"

// happyPath settles payments the common way, webhook first and query first,
// and counts what each one cost: provider calls (paysim's counters) and API
// writes (the API server's).
func (b *bench) happyPath(ctx context.Context) error {
	cp := b.st.CP
	if err := createNamespace(ctx, cp.Client, happyNS); err != nil {
		return err
	}
	apiURL := b.st.Sim.URL + "/kukopay"
	// Webhook first: the outcome comes 1 s after create, the first status
	// query is due after 30 s (the default schedule), so the webhook wins.
	if _, err := createProvider(ctx, cp.Client, providerSpec{ns: happyNS, name: "webhook-first", apiURL: apiURL}); err != nil {
		return err
	}
	// Query first: nothing is delivered; the first query, 2 s after create,
	// finds the outcome.
	if _, err := createProvider(ctx, cp.Client, providerSpec{ns: happyNS, name: "query-first", apiURL: apiURL,
		schedule: []time.Duration{2 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}}); err != nil {
		return err
	}
	if err := b.st.StartReceiver(ctx); err != nil {
		return err
	}
	if err := b.st.StartManager(ctx); err != nil {
		return err
	}
	for _, c := range []struct{ name, webhook string }{
		{"webhook-first", b.st.ReceiverURL + "/webhooks/" + happyNS + "/webhook-first"},
		{"query-first", ""},
	} {
		if err := b.st.Sim.SetWebhookTarget(ctx, paysim.KukoPay, c.webhook, signingSecret); err != nil {
			return err
		}
		hp, err := b.happyCase(ctx, c.name)
		if err != nil {
			return err
		}
		b.res.HappyPath = append(b.res.HappyPath, hp)
		b.logf("happy path %s: %.2f calls, %.2f status writes, %.2f API writes per payment", c.name, hp.CallsPerPayment, hp.StatusWritesPerPayment, hp.WritesPerPayment)
	}
	if err := b.storage(ctx); err != nil {
		return err
	}
	b.st.Manager.Stop(20 * time.Second)
	b.st.Receiver.Stop(20 * time.Second)
	return cleanNamespace(ctx, cp.Client, happyNS)
}

func (b *bench) happyCase(ctx context.Context, provider string) (HappyPath, error) {
	cp := b.st.CP
	n := b.opts.Happy
	b.waitQuiet(ctx, b.st.ManagerMetrics, "rest_client_requests_total")
	if err := b.st.Sim.ResetCounters(ctx); err != nil {
		return HappyPath{}, err
	}
	apiBefore, err := cp.APIRequests(ctx)
	if err != nil {
		return HappyPath{}, err
	}
	meta := map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed), paysim.MetaAfter: "1s"}
	ps := make([]*v1alpha1.Payment, n)
	for i := range ps {
		name := fmt.Sprintf("%s-%d", provider, i)
		ps[i] = newPayment(happyNS, name, provider, "", "", meta)
	}
	if err := createAll(ctx, cp.Client, ps); err != nil {
		return HappyPath{}, err
	}
	settled, err := waitPayments(ctx, cp.Client, happyNS, provider, n, 3*time.Minute, func(p *v1alpha1.Payment) bool {
		return p.Status.Phase == v1alpha1.PhaseSucceeded
	})
	if err != nil {
		return HappyPath{}, err
	}
	// Every event's result is written after the answer: wait for those
	// writes, and for the manager's reaction to the last changes.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var l v1alpha1.WebhookEventList
		if err := cp.Client.List(ctx, &l, client.InNamespace(happyNS)); err != nil {
			return HappyPath{}, err
		}
		pending := 0
		for _, e := range l.Items {
			if e.Spec.Provider == provider && !e.Status.Result.IsDone() {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.waitQuiet(ctx, b.st.ManagerMetrics, "rest_client_requests_total")
	b.waitQuiet(ctx, b.st.ReceiverMetrics, "rest_client_requests_total")
	apiAfter, err := cp.APIRequests(ctx)
	if err != nil {
		return HappyPath{}, err
	}
	counters, err := b.st.Sim.Counters(ctx)
	if err != nil {
		return HappyPath{}, err
	}
	queries := 0
	for _, q := range counters.QueriesByPayment {
		queries += q
	}
	writes := func(keep func(map[string]string) bool) float64 {
		return apiDelta(apiBefore, apiAfter, func(l map[string]string) bool {
			switch l["verb"] {
			case "POST", "PUT", "PATCH", "DELETE", "APPLY":
				return keep(l)
			}
			return false
		})
	}
	fn := float64(n)
	var lat []time.Duration
	for _, p := range settled {
		for _, h := range p.Status.History {
			if h.To == v1alpha1.PhaseSucceeded {
				lat = append(lat, h.Time.Sub(p.CreationTimestamp.Time))
				break
			}
		}
	}
	return HappyPath{
		Case: provider, Payments: n,
		CallsPerPayment:   float64(harness.ProviderCalls(counters)) / fn,
		CreatesPerPayment: float64(counters.CreateRequests) / fn,
		QueriesPerPayment: float64(queries) / fn,
		StatusWritesPerPayment: writes(func(l map[string]string) bool {
			return l["resource"] == "payments" && l["subresource"] == "status"
		}) / fn,
		WritesPerPayment: (writes(func(l map[string]string) bool {
			return l["group"] == v1alpha1.GroupVersion.Group || l["resource"] == "events"
		}) - fn) / fn, // the benchmark's own creates are not the payment's cost
		EventWritesPerPayment: writes(func(l map[string]string) bool { return l["resource"] == "webhookevents" }) / fn,
		KubeEventsPerPayment:  writes(func(l map[string]string) bool { return l["resource"] == "events" }) / fn,
		// Creation timestamps have whole seconds: settle times are ±1 s.
		SettleP50Ms: harness.Ms(harness.Percentile(lat, 0.5)),
		SettleP99Ms: harness.Ms(harness.Percentile(lat, 0.99)),
	}, nil
}

// waitPayments polls until n payments of provider in ns satisfy done.
func waitPayments(ctx context.Context, c client.Client, ns, provider string, n int, timeout time.Duration, done func(*v1alpha1.Payment) bool) ([]v1alpha1.Payment, error) {
	deadline := time.Now().Add(timeout)
	for {
		var l v1alpha1.PaymentList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var ok []v1alpha1.Payment
		for _, p := range l.Items {
			if p.Spec.ProviderRef.Name == provider && done(&p) {
				ok = append(ok, p)
			}
		}
		if len(ok) >= n {
			return ok, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d payments of %s/%s done after %s", len(ok), n, ns, provider, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
