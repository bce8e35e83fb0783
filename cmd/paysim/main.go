// Command paysim runs the payment provider simulator (see internal/paysim and
// docs/paysim.md): one HTTP server speaking the KukoPay (/kukopay), PayPal (/paypal) and
// generic async-job (/generic) APIs, checkout lifecycle and refunds included, with
// scripted outcomes, payer pages, signed webhooks, fault injection and a control API
// under /_paysim/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "paysim:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("paysim", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: paysim [flags]\n\n"+
			"Simulates KukoPay (/kukopay), PayPal (/paypal), a generic async-job provider (/generic)\n"+
			"and Stripe (/stripe) on one port; control API under /_paysim/ (see docs/paysim.md).\n"+
			"Rates are probabilities in [0,1]; simulated delays are multiplied by --time-factor.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var (
		addr        = fs.String("addr", ":8080", "listen address")
		timeFactor  = fs.Float64("time-factor", 1, "multiplier for simulated delays (outcome delays, webhook retry schedules, webhook delay fault); 0.001 = 1000x faster")
		seed        = fs.Uint64("seed", 1, "seed for fault decisions and generated ids (same seed + same requests = same faults)")
		logLevel    = fs.String("log-level", "info", "debug, info, warn or error")
		deliveryTO  = fs.Duration("delivery-timeout", 10*time.Second, "how long a webhook receiver has to answer (not scaled)")
		idemWindow  = fs.Duration("idempotency-window", 24*time.Hour, "how long an idempotency key replays its first answer")
		tokenTTL    = fs.Duration("paypal-token-ttl", 9*time.Hour, "lifetime of issued PayPal OAuth2 tokens")
		webhookID   = fs.String("paypal-webhook-id", paysim.DefaultPayPalWebhookID, "PayPal webhook id paysim signs for and verifies")
		kukoKey     = fs.String("kukopay-api-key", "", "KukoPay API key to accept (empty: any non-empty key)")
		ppID        = fs.String("paypal-client-id", "", "PayPal client id to accept (empty: any)")
		ppSecret    = fs.String("paypal-client-secret", "", "PayPal client secret to accept (empty: any)")
		genToken    = fs.String("generic-token", "", "generic provider bearer token to accept (empty: any)")
		stripeKey   = fs.String("stripe-secret-key", "", "Stripe secret key to accept (empty: any non-empty key)")
		outcome     = fs.String("default-outcome", "succeed", "outcome of unscripted payments: succeed, fail, expire, processing, pending, mismatch, unknown, approve, abandon, needs_action")
		outcomeWait = fs.Duration("default-after", 2*time.Second, "simulated delay before an unscripted payment's outcome")
		ppAuth      = fs.Duration("paypal-authorization-period", paysim.DefaultPayPalAuthorizationPeriod, "how long a PayPal authorization can be captured (simulated, scaled)")
		kukoAuth    = fs.Duration("kukopay-authorization-period", paysim.DefaultKukoPayAuthorizationPeriod, "how long a KukoPay authorization (requires_capture) can be captured (simulated, scaled)")
		checkoutTTL = fs.Duration("checkout-ttl", paysim.DefaultCheckoutTTL, "lifetime of a KukoPay or generic payer link when the create request sets none (simulated, scaled)")
		ppOrderLife = fs.Duration("paypal-order-lifetime", paysim.DefaultPayPalOrderLifetime, "how long a PayPal order nobody completed lives before PayPal deletes it (simulated, scaled)")
		faultOps    = fs.String("fault-operations", "", "comma-separated operations the API faults apply to (empty: all): "+strings.Join(paysim.Operations(), ", "))
	)
	urls, secrets := map[string]*string{}, map[string]*string{}
	for _, p := range []string{paysim.KukoPay, paysim.PayPal, paysim.Generic, paysim.Stripe} {
		urls[p] = fs.String(p+"-webhook-url", "", p+" webhook target URL (empty: record events, deliver nothing)")
		secrets[p] = fs.String(p+"-webhook-secrets", "", p+" signing secrets, comma-separated; two = rotation (empty: built-in default)")
	}
	var f paysim.Faults
	fs.Float64Var(&f.ServerErrorRate, "fault-api-5xx", 0, "rate of API calls answered 500 without processing")
	fs.Float64Var(&f.TooManyRequestsRate, "fault-api-429", 0, "rate of API calls answered 429 with Retry-After")
	fs.DurationVar(&f.RetryAfter, "fault-retry-after", time.Second, "Retry-After sent with injected 429s")
	fs.Float64Var(&f.SlowRate, "fault-api-slow", 0, "rate of API calls answered after --fault-slow-delay")
	fs.DurationVar(&f.SlowDelay, "fault-slow-delay", 15*time.Second, "delay of slow answers (real time, to trip client timeouts)")
	fs.Float64Var(&f.LostResponseRate, "fault-api-lost-response", 0, "rate of API calls processed and then answered 500 (answer lost)")
	fs.Float64Var(&f.GarbledAnswerRate, "fault-api-garbled", 0, "rate of API calls processed and then answered 2xx with an unreadable body")
	fs.StringVar(&f.GarbledBody, "fault-garbled-body", "", "body of a garbled answer (empty: the real body cut in half)")
	fs.BoolVar(&f.FrontServerErrors, "fault-api-5xx-front", false, "injected 500s come from in front of the API: Stripe stores none under the idempotency key (default: stored and replayed, as Stripe does with its endpoints' 500s)")
	fs.Float64Var(&f.DropRate, "fault-webhook-drop", 0, "rate of events never delivered")
	fs.Float64Var(&f.DuplicateRate, "fault-webhook-duplicate", 0, "rate of events delivered a second time after success")
	fs.Float64Var(&f.ReorderRate, "fault-webhook-reorder", 0, "rate of events held back until the next event went out")
	fs.Float64Var(&f.DelayRate, "fault-webhook-delay", 0, "rate of events whose first attempt is delayed by --fault-webhook-delay-by")
	fs.DurationVar(&f.WebhookDelay, "fault-webhook-delay-by", 30*time.Second, "simulated delay for delayed webhooks (scaled)")
	fs.DurationVar(&f.ReorderHold, "fault-webhook-reorder-hold", time.Minute, "simulated maximum hold of a reordered webhook (scaled)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	for _, op := range strings.Split(*faultOps, ",") {
		if op = strings.TrimSpace(op); op == "" {
			continue
		}
		if !slices.Contains(paysim.Operations(), op) {
			return fmt.Errorf("--fault-operations: unknown operation %q (known: %s)", op, strings.Join(paysim.Operations(), ", "))
		}
		f.Operations = append(f.Operations, op)
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	def := &paysim.Script{Outcome: paysim.Outcome(*outcome), After: *outcomeWait}
	if err := paysim.ValidateScript(*def); err != nil {
		return fmt.Errorf("--default-outcome: %w", err)
	}
	opts := paysim.Options{
		TimeFactor: *timeFactor, Seed: *seed, Logger: logger, DeliveryTimeout: *deliveryTO,
		IdempotencyWindow: *idemWindow, PayPalTokenTTL: *tokenTTL, PayPalWebhookID: *webhookID,
		KukoPayAPIKey: *kukoKey, PayPalClientID: *ppID, PayPalClientSecret: *ppSecret, GenericToken: *genToken, StripeSecretKey: *stripeKey,
		DefaultScript: def, Faults: f,
		PayPalAuthorizationPeriod: *ppAuth, KukoPayAuthorizationPeriod: *kukoAuth, CheckoutTTL: *checkoutTTL,
		PayPalOrderLifetime: *ppOrderLife,
		WebhookTargets:      map[string]string{}, WebhookSecrets: map[string][][]byte{},
	}
	for p, u := range urls {
		opts.WebhookTargets[p] = *u
		for _, sec := range strings.Split(*secrets[p], ",") {
			if sec = strings.TrimSpace(sec); sec != "" {
				opts.WebhookSecrets[p] = append(opts.WebhookSecrets[p], []byte(sec))
			}
		}
	}
	sim := paysim.New(opts)
	defer sim.Close()

	srv := &http.Server{Addr: *addr, Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("paysim listening", "addr", *addr, "timeFactor", *timeFactor, "seed", *seed)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
