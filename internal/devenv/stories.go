package devenv

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
)

// Story is one demo Payment, what the provider does with it, what the payer
// and the operator do along the way, and the phase it must end in.
type Story struct {
	Name     string
	Provider string
	Title    string
	// Script is what the provider does with the payment: a paysim rule for
	// the story's merchant reference.
	Script   paysim.Script
	Amount   int64
	Currency string
	// ExpiresIn is spec.expiresAfter (a Go duration), if any.
	ExpiresIn string
	// Checkout: the payer approves at the provider (spec.checkout).
	Checkout      bool
	CaptureMethod v1alpha1.CaptureMethod
	// Acts are done in order, each once its cue shows on the Payment.
	Acts        []Act
	Expect      v1alpha1.PaymentPhase
	NeedsReview string // expected NeedsReview reason, if any
	// Failure is the expected status.failure.code, if any: why the payment
	// ended as it did, where the phase alone does not tell the story.
	Failure string
}

// Cue is what the payment must show before an act.
type Cue struct {
	// PayerLink: status.customerAction.url is set.
	PayerLink bool
	// Phase: the payment is in this phase.
	Phase v1alpha1.PaymentPhase
	// RefundSucceeded: the story's Refund of this name has succeeded.
	RefundSucceeded string
}

// Act is one thing a person (or the provider) does in a story: exactly one
// of Payer, Annotate, Refund and FailRefund is set.
type Act struct {
	When Cue
	// Payer is the payer's decision at status.customerAction.url ("approve").
	Payer string
	// Annotate is `kubectl annotate payment <story> key=value`.
	Annotate []string // key, value
	// Refund is `kubectl apply` of a Refund of the story's payment.
	Refund *RefundAct
	// FailRefund names a Refund of the story that the provider fails after
	// it succeeded (Stripe: the refund's balance transaction is reversed).
	FailRefund string
}

// RefundAct is a Refund the story applies; it must reach Succeeded, or
// Failed when the provider reverses it (Reversed).
type RefundAct struct {
	Name     string
	Amount   int64 // minor units; 0 refunds everything still refundable
	Reason   string
	Reversed bool
}

// Final is the phase the Refund must end in.
func (r RefundAct) Final() v1alpha1.RefundPhase {
	if r.Reversed {
		return v1alpha1.RefundFailed
	}
	return v1alpha1.RefundSucceeded
}

// Refunds lists the Refunds a story applies.
func (s Story) Refunds() []RefundAct {
	var out []RefundAct
	for _, a := range s.Acts {
		if a.Refund != nil {
			out = append(out, *a.Refund)
		}
	}
	return out
}

// Stories are the demo's payments. The providers are set up so that each
// story exercises one path: kukopay delivers webhooks normally, paypal
// duplicates and reorders them, generic delivers none (status queries alone
// settle its payments), stripe loses every webhook.
var Stories = []Story{
	{Name: "webhook-on-time", Provider: "kukopay", Title: "webhook arrives on time",
		Script: paysim.Script{Outcome: paysim.OutcomeSucceed, After: 30 * time.Second}, Amount: 1999, Currency: "USD", Expect: v1alpha1.PhaseSucceeded},
	{Name: "webhook-lost", Provider: "generic", Title: "webhook lost, recovered by a status query",
		Script: paysim.Script{Outcome: paysim.OutcomeSucceed, After: 30 * time.Second}, Amount: 4200, Currency: "EUR", Expect: v1alpha1.PhaseSucceeded},
	{Name: "duplicates-reordered", Provider: "paypal", Title: "every webhook delivered twice, some held back",
		Script: paysim.Script{Outcome: paysim.OutcomeSucceed, After: 30 * time.Second}, Amount: 2500, Currency: "USD", Expect: v1alpha1.PhaseSucceeded},
	{Name: "declined", Provider: "kukopay", Title: "declined by the provider",
		Script: paysim.Script{Outcome: paysim.OutcomeFail, After: 20 * time.Second}, Amount: 999, Currency: "USD", Expect: v1alpha1.PhaseFailed},
	{Name: "amount-mismatch", Provider: "kukopay", Title: "paid a different amount: needs review",
		Script: paysim.Script{Outcome: paysim.OutcomeMismatch, After: 20 * time.Second}, Amount: 5000, Currency: "JPY", Expect: v1alpha1.PhaseUnknown, NeedsReview: v1alpha1.ReasonAmountMismatch},
	{Name: "unpaid", Provider: "kukopay", Title: "never paid: closed out as Expired",
		Script: paysim.Script{Outcome: paysim.OutcomePending}, Amount: 1500, Currency: "GBP", ExpiresIn: "40s", Expect: v1alpha1.PhaseExpired},

	{Name: "payer-approves", Provider: "paypal", Title: "payer approves at the link; captured automatically",
		Script: paysim.Script{Outcome: paysim.OutcomeNeedsAction}, Amount: 3500, Currency: "USD", Checkout: true,
		Acts: []Act{{When: Cue{PayerLink: true}, Payer: "approve"}}, Expect: v1alpha1.PhaseSucceeded},
	{Name: "manual-capture", Provider: "kukopay", Title: "authorized, then 30.00 of 45.00 captured by hand",
		Script: paysim.Script{Outcome: paysim.OutcomeNeedsAction}, Amount: 4500, Currency: "USD", Checkout: true, CaptureMethod: v1alpha1.CaptureManual,
		Acts: []Act{
			{When: Cue{PayerLink: true}, Payer: "approve"},
			{When: Cue{Phase: v1alpha1.PhaseAuthorized}, Annotate: []string{v1alpha1.AnnotationCapture, "3000"}},
		}, Expect: v1alpha1.PhaseSucceeded},
	{Name: "canceled", Provider: "kukopay", Title: "authorized, then canceled before capture",
		Script: paysim.Script{Outcome: paysim.OutcomeNeedsAction}, Amount: 1200, Currency: "EUR", Checkout: true, CaptureMethod: v1alpha1.CaptureManual,
		Acts: []Act{
			{When: Cue{PayerLink: true}, Payer: "approve"},
			{When: Cue{Phase: v1alpha1.PhaseAuthorized}, Annotate: []string{v1alpha1.AnnotationCancel, "customer changed their mind"}},
		}, Expect: v1alpha1.PhaseCanceled},
	{Name: "abandoned-checkout", Provider: "paypal", Title: "payer never approves: closed out as Expired",
		Script: paysim.Script{Outcome: paysim.OutcomeAbandon}, Amount: 800, Currency: "USD", Checkout: true, ExpiresIn: "40s", Expect: v1alpha1.PhaseExpired},
	{Name: "paypal-order-expired", Provider: "paypal", Title: "PayPal: payer never approves; PayPal deletes the order",
		Script: paysim.Script{Outcome: paysim.OutcomeAbandon}, Amount: 1100, Currency: "USD", Checkout: true,
		Expect: v1alpha1.PhaseExpired, Failure: v1alpha1.ReasonOrderExpired},
	{Name: "stripe-checkout", Provider: "stripe", Title: "Stripe: payer pays, webhook lost, a query settles it",
		Script: paysim.Script{Outcome: paysim.OutcomePending}, Amount: 2900, Currency: "EUR", Checkout: true,
		Acts: []Act{{When: Cue{PayerLink: true}, Payer: "approve"}}, Expect: v1alpha1.PhaseSucceeded},
	{Name: "stripe-refund-reversed", Provider: "stripe", Title: "Stripe: a refund fails after succeeding; the payment is whole again",
		Script: paysim.Script{Outcome: paysim.OutcomePending}, Amount: 2000, Currency: "USD", Checkout: true,
		Acts: []Act{
			{When: Cue{PayerLink: true}, Payer: "approve"},
			{When: Cue{Phase: v1alpha1.PhaseSucceeded}, Refund: &RefundAct{Name: "reversed-refund", Reason: "returned", Reversed: true}},
			{When: Cue{RefundSucceeded: "reversed-refund"}, FailRefund: "reversed-refund"},
		}, Expect: v1alpha1.PhaseSucceeded},
	{Name: "refunded", Provider: "kukopay", Title: "refunded in part, then in full, by kubectl apply",
		Script: paysim.Script{Outcome: paysim.OutcomeSucceed, After: 10 * time.Second}, Amount: 6000, Currency: "USD",
		Acts: []Act{
			{When: Cue{Phase: v1alpha1.PhaseSucceeded}, Refund: &RefundAct{Name: "refunded-part", Amount: 1500, Reason: "one item returned"}},
			{When: Cue{RefundSucceeded: "refunded-part"}, Refund: &RefundAct{Name: "refunded-rest", Reason: "order canceled"}},
		}, Expect: v1alpha1.PhaseRefunded},
}

// merchantReference is what paywarden sends for a demo payment (the default,
// "<namespace>.<name>"), which the story's paysim rule matches.
func (s Story) merchantReference() string { return Namespace + "." + s.Name }

// payment is the story's Payment manifest.
func (s Story) payment() (*v1alpha1.Payment, error) {
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: s.Name, Annotations: map[string]string{"paywarden.dev/story": s.Title}},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:   v1alpha1.LocalObjectReference{Name: s.Provider},
			Amount:        v1alpha1.Amount{Value: s.Amount, Currency: s.Currency},
			Description:   s.Title,
			CaptureMethod: s.CaptureMethod,
		},
	}
	if s.Checkout {
		p.Spec.Checkout = &v1alpha1.CheckoutSpec{
			ReturnURL: "http://localhost:8000/shop/thanks?order=" + s.Name,
			CancelURL: "http://localhost:8000/shop/cart?order=" + s.Name,
		}
	}
	if s.ExpiresIn != "" {
		d, err := time.ParseDuration(s.ExpiresIn)
		if err != nil {
			return nil, fmt.Errorf("story %s: expiresIn: %w", s.Name, err)
		}
		p.Spec.ExpiresAfter = &metav1.Duration{Duration: d}
	}
	return p, nil
}

// refund is a RefundAct's manifest.
func (s Story) refund(r RefundAct) *v1alpha1.Refund {
	out := &v1alpha1.Refund{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Refund"},
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: r.Name},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: s.Name}, Reason: r.Reason},
	}
	if r.Amount > 0 {
		out.Spec.Amount = &v1alpha1.Amount{Value: r.Amount, Currency: s.Currency}
	}
	return out
}

// refundYAML is the manifest a person would pipe to `kubectl apply -f -`.
func refundYAML(r *v1alpha1.Refund) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s\nkind: Refund\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  paymentRef:\n    name: %s\n",
		r.APIVersion, r.Name, r.Namespace, r.Spec.PaymentRef.Name)
	if a := r.Spec.Amount; a != nil {
		fmt.Fprintf(&b, "  amount:\n    value: %d\n    currency: %s\n", a.Value, a.Currency)
	}
	if r.Spec.Reason != "" {
		fmt.Fprintf(&b, "  reason: %q\n", r.Spec.Reason)
	}
	return b.String()
}

// describe is the act in words, with the command a person would type.
func (a Act) describe(s Story) string {
	switch {
	case a.Payer != "":
		return "the payer opens status.customerAction.url and chooses " + a.Payer
	case len(a.Annotate) == 2:
		return fmt.Sprintf("kubectl annotate payment -n %s %s %s=%q", Namespace, s.Name, a.Annotate[0], a.Annotate[1])
	case a.Refund != nil:
		return fmt.Sprintf("kubectl apply -f - (Refund %s of %s)", a.Refund.Name, refundAmount(*a.Refund, s.Currency))
	case a.FailRefund != "":
		return "the provider fails Refund " + a.FailRefund + " after it succeeded"
	}
	return "nothing"
}

func (c Cue) describe() string {
	switch {
	case c.PayerLink:
		return "the payer's link is in status"
	case c.Phase != "":
		return "phase " + string(c.Phase)
	case c.RefundSucceeded != "":
		return "Refund " + c.RefundSucceeded + " Succeeded"
	}
	return "at once"
}

func refundAmount(r RefundAct, currency string) string {
	if r.Amount == 0 {
		return "everything still refundable"
	}
	return v1alpha1.FormatAmount(r.Amount, currency)
}

// scriptStories tells each story's paysim what the provider does with it.
func (e *Env) scriptStories(ctx context.Context, sims map[string]int) error {
	e.sims = sims
	for _, s := range Stories {
		control := paysim.NewControlClient(fmt.Sprintf("http://127.0.0.1:%d", sims[s.Provider]))
		if err := control.Script(ctx, paysim.Rule{Provider: s.Provider, MerchantReference: s.merchantReference(), Script: s.Script}); err != nil {
			return fmt.Errorf("story %s: %w", s.Name, err)
		}
	}
	return nil
}

// direct does the stories' acts as their cues show, like the payer and the
// operator would; it returns when every act is done or ctx ends. A failed act
// is logged and tried again on the next look.
func (e *Env) direct(ctx context.Context) {
	next := map[string]int{}
	e.setPendingActs(next)
	cuedAt := map[string]time.Time{}
	lastErr := map[string]string{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := 0
		for _, s := range Stories {
			i := next[s.Name]
			if i >= len(s.Acts) {
				continue
			}
			pending++
			act := s.Acts[i]
			p := &v1alpha1.Payment{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: s.Name}, p); err != nil {
				continue
			}
			if !e.cued(ctx, p, act.When) {
				continue
			}
			key := fmt.Sprintf("%s/%d", s.Name, i)
			if _, ok := cuedAt[key]; !ok {
				cuedAt[key] = time.Now()
			}
			if time.Since(cuedAt[key]) < e.opts.Pause {
				continue
			}
			if err := e.perform(ctx, s, p, act); err != nil {
				if ctx.Err() != nil {
					return
				}
				if msg := err.Error(); lastErr[key] != msg {
					lastErr[key] = msg
					e.logf("[%s] %s failed (tried again): %v", s.Name, act.describe(s), err)
				}
				continue
			}
			e.logf("[%s] %s: %s", s.Name, act.When.describe(), act.describe(s))
			next[s.Name] = i + 1
			e.setPendingActs(next)
		}
		if pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// setPendingActs records what the director has still to do.
func (e *Env) setPendingActs(next map[string]int) {
	var out []string
	for _, s := range Stories {
		for _, a := range s.Acts[next[s.Name]:] {
			out = append(out, s.Name+": "+a.describe(s))
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pendingActs = out
}

// PendingActs lists the acts the director has not done yet ("<story>: <act>").
func (e *Env) PendingActs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.pendingActs...)
}

func (e *Env) cued(ctx context.Context, p *v1alpha1.Payment, c Cue) bool {
	switch {
	case c.PayerLink:
		return p.Status.CustomerAction != nil && p.Status.CustomerAction.URL != ""
	case c.Phase != "":
		return p.Status.Phase == c.Phase
	case c.RefundSucceeded != "":
		r := &v1alpha1.Refund{}
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: c.RefundSucceeded}, r)
		return err == nil && r.Status.Phase == v1alpha1.RefundSucceeded
	}
	return true
}

func (e *Env) perform(ctx context.Context, s Story, p *v1alpha1.Payment, a Act) error {
	switch {
	case a.Payer != "":
		return payerDecides(ctx, p.Status.CustomerAction.URL, a.Payer)
	case len(a.Annotate) == 2:
		return e.annotate(ctx, p, a.Annotate[0], a.Annotate[1])
	case a.Refund != nil:
		return e.applyRefund(ctx, s.refund(*a.Refund))
	case a.FailRefund != "":
		return e.failRefund(ctx, s, a.FailRefund)
	}
	return fmt.Errorf("story %s: an act with nothing to do", s.Name)
}

// failRefund has the story's provider (paysim's Stripe mode) fail a refund
// that succeeded: POST /_paysim/stripe/refunds/{id}/fail.
func (e *Env) failRefund(ctx context.Context, s Story, name string) error {
	r := &v1alpha1.Refund{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, r); err != nil {
		return err
	}
	if r.Status.ProviderRefundID == "" {
		return fmt.Errorf("refund %s has no provider refund id yet", name)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d/_paysim/stripe/refunds/%s/fail", e.sims[s.Provider], url.PathEscape(r.Status.ProviderRefundID))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"reason":"expired_or_canceled_card"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("fail refund %s at paysim: %s", r.Status.ProviderRefundID, resp.Status)
	}
	return nil
}

// payerDecides posts the payer's decision to the provider's payer page (every
// paysim provider's page takes decision=approve), without following the
// redirect back to the shop.
func payerDecides(ctx context.Context, link, decision string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, link, strings.NewReader(url.Values{"decision": {decision}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("payer page %s: %s", link, resp.Status)
	}
	return nil
}

// annotate sets an annotation the way an operator does: with kubectl when it
// is installed, else the same merge patch through the API.
func (e *Env) annotate(ctx context.Context, p *v1alpha1.Payment, key, value string) error {
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		return e.kubectl(ctx, kubectl, "", "annotate", "--overwrite", "payment", "-n", p.Namespace, p.Name, key+"="+value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	return e.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// applyRefund applies a Refund the way an operator does: `kubectl apply -f -`
// when kubectl is installed, else a create through the API. Applying one that
// exists is not an error (a retried act).
func (e *Env) applyRefund(ctx context.Context, r *v1alpha1.Refund) error {
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		return e.kubectl(ctx, kubectl, refundYAML(r), "apply", "-f", "-")
	}
	if err := e.Client.Create(ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (e *Env) kubectl(ctx context.Context, kubectl, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// demoSecrets are a provider's credentials and webhook signing Secrets.
func demoSecrets(name string) (creds, signing *corev1.Secret) {
	creds = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name + "-credentials"},
		StringData: map[string]string{"apiKey": "sk_demo", "clientID": "demo-client", "clientSecret": "demo-secret", "token": "demo-token", "secretKey": "sk_test_demo"}}
	signing = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name + "-webhook-secrets"},
		StringData: map[string]string{"current": signingSecrets[name]}}
	return creds, signing
}
