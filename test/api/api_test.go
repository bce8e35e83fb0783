// Package api_test proves paywarden's CRDs against a real kube-apiserver:
// they install, the samples are accepted, bad Payments are rejected with a
// clear message, the spec is immutable, status is a separate subresource, the
// printer columns come back and status.phase is a selectable field.
package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

func validPayment(ns, name string) *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:      v1alpha1.Amount{Value: 1999, Currency: "USD"},
		},
	}
}

func TestCRDsInstalled(t *testing.T) {
	ctx := context.Background()
	for _, list := range []client.ObjectList{&v1alpha1.PaymentList{}, &v1alpha1.PaymentProviderList{}, &v1alpha1.WebhookEventList{}} {
		if err := env.Client.List(ctx, list); err != nil {
			t.Errorf("list %T: %v", list, err)
		}
	}
}

func TestSamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, obj := range readObjects(t, f) {
			obj.SetNamespace(ns)
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Errorf("%s: %s %s rejected: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
				continue
			}
			kinds[obj.GetKind()]++
		}
	}
	for _, k := range []string{"Secret", "PaymentProvider", "Payment", "Refund", "WebhookEvent"} {
		if kinds[k] == 0 {
			t.Errorf("no sample of kind %s was applied (applied: %v)", k, kinds)
		}
	}
	var tracked v1alpha1.Payment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order-1002-checkout"}, &tracked); err != nil {
		t.Fatalf("tracked sample: %v", err)
	}
	if tracked.Spec.ProviderPaymentID == "" {
		t.Errorf("tracked sample has no providerPaymentID")
	}
	// Defaults from the schema are applied by the API server.
	var prov v1alpha1.PaymentProvider
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kukopay"}, &prov); err != nil {
		t.Fatal(err)
	}
	if prov.Spec.CircuitBreaker.ConsecutiveFailures == nil || *prov.Spec.CircuitBreaker.ConsecutiveFailures != 5 {
		t.Errorf("circuitBreaker.consecutiveFailures default not applied: %+v", prov.Spec.CircuitBreaker)
	}
	if prov.Spec.Retention.WebhookEvents == nil || prov.Spec.Retention.WebhookEvents.Duration != v1alpha1.DefaultWebhookRetention {
		t.Errorf("retention.webhookEvents default not applied: %+v", prov.Spec.Retention)
	}
	if prov.Spec.Retention.FinalPayments == nil || prov.Spec.Retention.FinalPayments.Duration != v1alpha1.DefaultFinalRetention {
		t.Errorf("retention.finalPayments default not applied: %+v", prov.Spec.Retention)
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func TestInvalidPaymentsAreRejected(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := []struct {
		name   string
		mutate func(p *v1alpha1.Payment)
		want   []string // fragments of the API server's message
	}{
		{"zero amount", func(p *v1alpha1.Payment) { p.Spec.Amount.Value = 0 }, []string{"spec.amount.value", "greater than or equal to 1"}},
		{"negative amount", func(p *v1alpha1.Payment) { p.Spec.Amount.Value = -5 }, []string{"spec.amount.value", "greater than or equal to 1"}},
		{"lowercase currency", func(p *v1alpha1.Payment) { p.Spec.Amount.Currency = "usd" }, []string{"spec.amount.currency", "^[A-Z]{3}$"}},
		{"four-letter currency", func(p *v1alpha1.Payment) { p.Spec.Amount.Currency = "USDT" }, []string{"spec.amount.currency"}},
		{"missing providerRef", func(p *v1alpha1.Payment) { p.Spec.ProviderRef.Name = "" }, []string{"spec.providerRef.name"}},
		{"merchant reference too long", func(p *v1alpha1.Payment) { p.Spec.MerchantReference = strings.Repeat("x", 65) }, []string{"spec.merchantReference", "64"}},
		{"bad expiresAfter", func(p *v1alpha1.Payment) { p.Spec.ExpiresAfter = &metav1.Duration{Duration: -time.Minute} }, []string{"spec.expiresAfter"}},
		{"unknown capture method", func(p *v1alpha1.Payment) { p.Spec.CaptureMethod = "Later" }, []string{"spec.captureMethod"}},
		{"plain http return URL", func(p *v1alpha1.Payment) {
			p.Spec.Checkout = &v1alpha1.CheckoutSpec{ReturnURL: "http://shop.example.com/done"}
		}, []string{"returnURL must be an https URL"}},
		{"return URL that is not a URL", func(p *v1alpha1.Payment) { p.Spec.Checkout = &v1alpha1.CheckoutSpec{ReturnURL: "https://"} }, []string{"returnURL must be an https URL"}},
		{"plain http cancel URL", func(p *v1alpha1.Payment) {
			p.Spec.Checkout = &v1alpha1.CheckoutSpec{ReturnURL: "https://shop.example.com/done", CancelURL: "http://shop.example.com/cancel"}
		}, []string{"cancelURL must be an https URL"}},
		{"a card number as payment method", func(p *v1alpha1.Payment) {
			p.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{PaymentMethod: "4242424242424242"}
		}, []string{"never a card number"}},
		{"a card number with spaces as payment method", func(p *v1alpha1.Payment) {
			p.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{PaymentMethod: "4242 4242 4242 4242"}
		}, []string{"spec.paymentMethod.paymentMethod"}},
		{"checkout and a stored payment method together", func(p *v1alpha1.Payment) {
			p.Spec.Checkout = &v1alpha1.CheckoutSpec{ReturnURL: "https://shop.example.com/done"}
			p.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{PaymentMethod: "pm_card_visa"}
		}, []string{"not both"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validPayment(ns, fmt.Sprintf("bad-%d", i))
			tc.mutate(p)
			err := env.Client.Create(ctx, p)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not mention %q", err.Error(), w)
				}
			}
		})
	}

	// Valid checkout shapes are accepted.
	for i, c := range []*v1alpha1.CheckoutSpec{
		{ReturnURL: "https://shop.example.com/done?order=1", CancelURL: "https://shop.example.com/cancel"},
		{ReturnURL: "http://localhost:8080/done"},
		{ReturnURL: "http://127.0.0.1/done"},
	} {
		p := validPayment(ns, fmt.Sprintf("checkout-%d", i))
		p.Spec.Checkout = c
		p.Spec.CaptureMethod = v1alpha1.CaptureManual
		if err := env.Client.Create(ctx, p); err != nil {
			t.Errorf("checkout %+v refused: %v", c, err)
		}
	}
	stored := validPayment(ns, "stored-method")
	stored.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{Customer: "cus_123", PaymentMethod: "pm_card_visa"}
	if err := env.Client.Create(ctx, stored); err != nil {
		t.Errorf("stored payment method refused: %v", err)
	}
	if stored.Spec.CaptureMethod != v1alpha1.CaptureAutomatic {
		t.Errorf("captureMethod defaulted to %q, want Automatic", stored.Spec.CaptureMethod)
	}

	// A payment without providerRef at all (not just an empty name).
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "payments.paywarden.dev/v1alpha1", "kind": "Payment",
		"metadata": map[string]any{"namespace": ns, "name": "no-provider"},
		"spec":     map[string]any{"amount": map[string]any{"value": int64(100), "currency": "EUR"}},
	}}
	err := env.Client.Create(ctx, u)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.providerRef: Required value") {
		t.Errorf("missing providerRef: want Invalid mentioning spec.providerRef, got %v", err)
	}
}

func TestPaymentSpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := []struct {
		name   string
		mutate func(p *v1alpha1.Payment)
		want   string
	}{
		{"amount", func(p *v1alpha1.Payment) { p.Spec.Amount.Value = 2999 }, "amount and currency are immutable"},
		{"currency", func(p *v1alpha1.Payment) { p.Spec.Amount.Currency = "EUR" }, "amount and currency are immutable"},
		{"providerRef", func(p *v1alpha1.Payment) { p.Spec.ProviderRef.Name = "paypal" }, "providerRef is immutable"},
		{"description", func(p *v1alpha1.Payment) { p.Spec.Description = "changed" }, "spec is immutable after creation"},
		{"providerPaymentID added later", func(p *v1alpha1.Payment) { p.Spec.ProviderPaymentID = "pay_x" }, "spec is immutable after creation"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validPayment(ns, fmt.Sprintf("immutable-%d", i))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			tc.mutate(p)
			err := env.Client.Update(ctx, p)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q does not say %q", err.Error(), tc.want)
			}
		})
	}
	// Metadata stays editable: operators annotate payments (requery, resolve).
	p := validPayment(ns, "annotated")
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Annotations = map[string]string{v1alpha1.AnnotationRequery: "1"}
	if err := env.Client.Update(ctx, p); err != nil {
		t.Errorf("annotating a payment must be allowed: %v", err)
	}
}

func TestStatusIsASeparateSubresource(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	p := validPayment(ns, "subresource")
	p.Status.Phase = v1alpha1.PhaseSucceeded // dropped on create
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != "" {
		t.Fatalf("status set through the main resource on create: %q", p.Status.Phase)
	}

	p.Status.Phase = v1alpha1.PhaseProcessing
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatalf("status update: %v", err)
	}
	// A write to the main resource cannot change status.
	p.Status.Phase = v1alpha1.PhaseFailed
	p.Labels = map[string]string{"team": "checkout"}
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatalf("update: %v", err)
	}
	got := &v1alpha1.Payment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.PhaseProcessing {
		t.Errorf("main-resource update changed status to %q", got.Status.Phase)
	}
	// A write to the status subresource cannot change spec.
	got.Spec.Description = "through status"
	got.Status.Phase = v1alpha1.PhaseSucceeded
	if err := env.Client.Status().Update(ctx, got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	final := &v1alpha1.Payment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), final); err != nil {
		t.Fatal(err)
	}
	if final.Spec.Description != "" || final.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("status update leaked into spec or was lost: description=%q phase=%q", final.Spec.Description, final.Status.Phase)
	}
	// An invalid status is rejected by the schema too.
	final.Status.Phase = "Paid"
	if err := env.Client.Status().Update(ctx, final); !apierrors.IsInvalid(err) {
		t.Errorf("phase outside the enum: want Invalid, got %v", err)
	}
}

func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	p := validPayment(ns, "columns")
	p.Spec.Amount = v1alpha1.Amount{Value: 1999, Currency: "JPY"}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	next := metav1.NewMicroTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	p.Status = v1alpha1.PaymentStatus{
		Phase: v1alpha1.PhasePending, ProviderPaymentID: "pay_123",
		AmountDisplay: v1alpha1.FormatAmount(1999, "JPY"),
		Query:         v1alpha1.QueryStatus{Attempts: 3, NextTime: &next},
		WaitingFor:    "Payer", CustomerAction: &v1alpha1.CustomerAction{URL: "https://pay.example.com/c/1"},
	}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}

	table := getTable(t, fmt.Sprintf("/apis/payments.paywarden.dev/v1alpha1/namespaces/%s/payments", ns))
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	// The default view stays narrow; -o wide adds the rest (priority 1).
	wantCols := []string{"Name", "Phase", "Amount", "Refunded", "Waiting-For", "Provider", "Age", "Provider-ID", "Attempts", "Next-Query", "Payer-Link", "Funds-Guaranteed-Until"}
	if strings.Join(names, ",") != strings.Join(wantCols, ",") {
		t.Fatalf("columns %v, want %v", names, wantCols)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("want 1 row, got %d", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	want := map[int]any{0: "columns", 1: "Pending", 2: "1999 JPY", 4: "Payer", 5: "kukopay", 7: "pay_123", 8: float64(3), 10: "https://pay.example.com/c/1"}
	for i, w := range want {
		if cells[i] != w {
			t.Errorf("column %s = %#v, want %#v", wantCols[i], cells[i], w)
		}
	}
	if s, _ := cells[9].(string); s == "" {
		t.Errorf("Next-Query column empty: %#v", cells[9])
	}
	for i, c := range table.ColumnDefinitions {
		if wide := i >= 7; (c.Priority > 0) != wide {
			t.Errorf("column %s has priority %d: the default view is Name..Age, the rest is -o wide", c.Name, c.Priority)
		}
	}
}

func getTable(t *testing.T, path string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(env.Config.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Table format is what kubectl asks for to print columns.
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("get table: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get table: %s: %s", resp.Status, raw)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(raw, table); err != nil {
		t.Fatalf("decode table: %v", err)
	}
	return table
}

func TestStatusPhaseIsSelectable(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	phases := map[string]v1alpha1.PaymentPhase{"a": v1alpha1.PhaseUnknown, "b": v1alpha1.PhaseSucceeded, "c": v1alpha1.PhaseUnknown, "d": v1alpha1.PhasePending}
	for name, phase := range phases {
		p := validPayment(ns, name)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = phase
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var list v1alpha1.PaymentList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"status.phase": "Unknown"}); err != nil {
		t.Fatalf("list with field selector: %v", err)
	}
	var got []string
	for _, p := range list.Items {
		got = append(got, p.Name)
	}
	if strings.Join(got, ",") != "a,c" {
		t.Errorf("status.phase=Unknown selected %v, want [a c]", got)
	}
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"status.result": "x"}); err == nil {
		t.Errorf("a field that is not selectable on Payments must be refused")
	}
}

// A provider's WebhookEvents are named "<provider>-<20 hex>", so a provider
// name over 232 characters would make every one of its events unstorable:
// such a provider is refused at admission, with the reason.
func TestProviderNameMustLeaveRoomForItsEventNames(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	provider := func(name string) *v1alpha1.PaymentProvider {
		return &v1alpha1.PaymentProvider{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.PaymentProviderSpec{
				Type: v1alpha1.ProviderKukoPay, APIURL: "https://api.kukopay.example",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "kukopay-credentials"},
			},
		}
	}
	// A valid DNS subdomain of n characters, with dots as a real name might have.
	name := func(n int) string {
		b := []byte(strings.Repeat("a", n))
		for i := 50; i < n-1; i += 51 {
			b[i] = '.'
		}
		return string(b)
	}
	if v1alpha1.MaxPaymentProviderNameLength != 253-1-20 {
		t.Fatalf("MaxPaymentProviderNameLength %d, want 253 - len(\"-\") - 20 hex", v1alpha1.MaxPaymentProviderNameLength)
	}

	t.Run("233 characters is rejected with the reason", func(t *testing.T) {
		err := env.Client.Create(ctx, provider(name(v1alpha1.MaxPaymentProviderNameLength+1)))
		if !apierrors.IsInvalid(err) {
			t.Fatalf("want Invalid, got %v", err)
		}
		for _, w := range []string{"at most 232 characters", "WebhookEvents", "253"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("message %q does not mention %q", err.Error(), w)
			}
		}
	})

	t.Run("232 characters is accepted and its events can be stored", func(t *testing.T) {
		p := provider(name(v1alpha1.MaxPaymentProviderNameLength))
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("create provider with a %d-character name: %v", len(p.Name), err)
		}
		evName := v1alpha1.WebhookEventName(p.Name, "evt_longest_name")
		if len(evName) != 253 {
			t.Fatalf("event name is %d characters, want exactly the 253 limit", len(evName))
		}
		ev := &v1alpha1.WebhookEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: evName},
			Spec: v1alpha1.WebhookEventSpec{
				Provider: p.Name, EventID: "evt_longest_name", Type: "payment.succeeded",
				Via: v1alpha1.ViaWebhook, ReceivedAt: metav1.Now(),
			},
		}
		if err := env.Client.Create(ctx, ev); err != nil {
			t.Fatalf("store an event of the provider: %v", err)
		}
	})
}
