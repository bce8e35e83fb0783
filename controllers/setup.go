package controllers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/ledger"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// Controller names one of the manager's controllers, for Options.Controllers.
// The names are the controllers' own (their logs and metrics carry them).
type Controller string

// The manager's controllers.
const (
	ControllerPayment   Controller = "payment"                  // PaymentReconciler
	ControllerInbox     Controller = "webhookevent"             // WebhookEventReconciler, the inbox processor
	ControllerProvider  Controller = "paymentprovider"          // PaymentProviderReconciler
	ControllerSweep     Controller = "paymentprovider-sweep"    // Sweep
	ControllerBackfill  Controller = "paymentprovider-backfill" // Backfill
	ControllerRetention Controller = "payment-retention"        // Retention
	ControllerBundles   Controller = "webhookbundle"            // WebhookBundleReconciler (needs Options.BundleNamespace)
	ControllerRefund    Controller = "refund"                   // RefundReconciler
)

// AllControllers are the controllers the manager runs, in the order Setup
// registers them.
var AllControllers = []Controller{
	ControllerSweep, ControllerPayment, ControllerInbox, ControllerProvider, ControllerBackfill, ControllerRetention, ControllerBundles, ControllerRefund,
}

// DefaultRecorderName is the reporting controller of the manager's Events.
const DefaultRecorderName = "paywarden-manager"

// Options tune Setup. The zero value wires the manager of cmd/manager.
type Options struct {
	// Controllers are the controllers to register: nil means all of them,
	// an empty list none. The others are still built (see Wiring), so a
	// test can call their Reconcile directly.
	Controllers []Controller
	// Clock drives every controller and the gateway; default real time.
	Clock clock.PassiveClock
	// Recorder receives every Event; default mgr.GetEventRecorder(DefaultRecorderName).
	Recorder events.EventRecorder
	// HTTPClient, when set, carries every provider call of the gateway.
	HTTPClient *http.Client
	// WrapClient, when set, wraps the manager's client wherever a controller
	// or the gateway's status writer writes through it (fault injection,
	// counting). Cache lookups of the gateway and the backfill's inbox
	// resolution read the manager's client directly.
	WrapClient func(client.Client) client.Client
	// PendingGrace overrides the inbox processor's DefaultPendingGrace.
	PendingGrace time.Duration
	// MaxConcurrentReconciles bounds payments reconciled in parallel (the
	// manager's --max-concurrent-reconciles); default 4.
	MaxConcurrentReconciles int
	// InboxMaxConcurrentReconciles bounds events the inbox processor handles
	// in parallel; default 4.
	InboxMaxConcurrentReconciles int
	// BundleNamespace is where the webhook receiver's verification bundles
	// are kept (the manager's namespace); the bundle controller runs only
	// when it is set.
	BundleNamespace string
	// LedgerNamespace is where the ledger of settled identities is kept
	// (internal/ledger; the manager's namespace, never a payments' one).
	// Empty: BundleNamespace; both empty: no ledger (tests only).
	LedgerNamespace string
	// LedgerRetention overrides ledger.DefaultRetention.
	LedgerRetention time.Duration
	// FinishedEventsEvery overrides DefaultFinishedEventsEvery: how often
	// finished WebhookEvents past retention are looked for.
	FinishedEventsEvery time.Duration
	// RetentionHorizon overrides payment.RetentionHorizon: how far ahead
	// retention keeps a final payment in its queue.
	RetentionHorizon time.Duration
	// Namespaces are the namespaces the manager's cache watches, when it
	// does not watch all of them: what the controllers read from the API
	// server directly is kept to them too.
	Namespaces []string
}

// Wiring is what Setup built: one gateway shared by every controller, and
// every controller, registered with the manager or not.
type Wiring struct {
	// Gateway holds each provider's adapter, rate limit and circuit breaker.
	Gateway *gateway.Gateway
	// ProviderEvents carries the gateway's news about refused configurations
	// to the provider controller and the payment reconciler.
	ProviderEvents *ProviderEvents
	Payments       *PaymentReconciler
	Inbox          *WebhookEventReconciler
	// FinishedEvents deletes finished WebhookEvents past retention; it runs
	// with the inbox processor.
	FinishedEvents *FinishedEvents
	Providers      *PaymentProviderReconciler
	Sweep          *Sweep
	Backfill       *Backfill
	Retention      *Retention
	Bundles        *WebhookBundleReconciler
	Refunds        *RefundReconciler
	// Secrets reads the Secrets PaymentProviders reference, never from a
	// cache of every Secret.
	Secrets *SecretReader
	// Ledger keeps settled identities after their objects are deleted; nil
	// when no namespace was given for it.
	Ledger *ledger.Store
	// PaymentCache is the thin cache of every Payment (internal/paymentcache):
	// the look-ups by order and provider id, retention's scan, the gauges
	// and the news of closed payments read it. The manager's own cache
	// holds only open ones.
	PaymentCache *paymentcache.Cache
	// Reader is the manager's client as the controllers read through it:
	// Payments found and read whole wherever they are
	// (paymentcache.NewClient), before any WrapClient.
	Reader client.Client
}

// Setup builds the manager's controllers around one gateway and registers the
// ones o picks, with the inbox's Payment indexes. Metrics, probes and leader
// election stay with the caller: they belong to the process, not the wiring.
func Setup(mgr ctrl.Manager, o Options) (*Wiring, error) {
	picked := o.Controllers
	if picked == nil {
		picked = AllControllers
	}
	for _, c := range picked {
		if !slices.Contains(AllControllers, c) {
			return nil, fmt.Errorf("unknown controller %q", c)
		}
	}
	runs := func(c Controller) bool { return slices.Contains(picked, c) }
	w, err := wire(mgr, o, runs(ControllerSweep))
	if err != nil {
		return nil, err
	}
	// The inbox's Payment indexes serve the inbox processor and the backfill.
	if err := inbox.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("inbox indexes: %w", err)
	}
	setups := map[Controller]func(ctrl.Manager) error{
		ControllerSweep:     w.Sweep.SetupWithManager,
		ControllerPayment:   w.Payments.SetupWithManager,
		ControllerInbox:     w.setupInbox,
		ControllerProvider:  w.Providers.SetupWithManager,
		ControllerBackfill:  w.Backfill.SetupWithManager,
		ControllerRetention: w.Retention.SetupWithManager,
		ControllerBundles:   w.Bundles.SetupWithManager,
		ControllerRefund:    w.Refunds.SetupWithManager,
	}
	for _, c := range AllControllers {
		if !runs(c) || c == ControllerBundles && o.BundleNamespace == "" {
			continue
		}
		if err := setups[c](mgr); err != nil {
			return nil, fmt.Errorf("%s controller: %w", c, err)
		}
	}
	return w, nil
}

// wire builds every reconciler over one client, clock, recorder and gateway;
// sweep says whether the sweep hands overdue payments to the reconciler.
func wire(mgr ctrl.Manager, o Options, sweep bool) (*Wiring, error) {
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	rec := o.Recorder
	if rec == nil {
		rec = mgr.GetEventRecorder(DefaultRecorderName)
	}
	thin, reader, err := paymentReads(mgr, o.Namespaces)
	if err != nil {
		return nil, err
	}
	writer := reader
	if o.WrapClient != nil {
		writer = o.WrapClient(writer)
	}

	// One gateway: status queries, backfill and the inbox share each
	// provider's rate limit and circuit breaker. A configuration a provider
	// refuses (401/403, a redirect) is noticed by the gateway on a call and
	// reported by the provider controller at once.
	w := &Wiring{ProviderEvents: &ProviderEvents{}, PaymentCache: thin, Reader: reader}
	secrets, err := NewSecretReader(context.Background(), mgr)
	if err != nil {
		return nil, err
	}
	w.Secrets = secrets
	w.Gateway = &gateway.Gateway{
		Reader:     secrets,
		HTTPClient: o.HTTPClient,
		Status:     statuswriter.Writer{Client: writer, APIReader: mgr.GetAPIReader()},
		Recorder:   rec, Clock: clk, Notify: w.ProviderEvents.Notify,
	}
	w.Sweep = &Sweep{Client: writer, Recorder: rec, Clock: clk}
	var led Ledger
	if ns := cmp.Or(o.LedgerNamespace, o.BundleNamespace); ns != "" {
		w.Ledger = &ledger.Store{Client: writer, Reader: mgr.GetAPIReader(), Namespace: ns, Retention: o.LedgerRetention, Clock: clk}
		led = w.Ledger
	}
	w.Payments = &PaymentReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
		Clock: clk, Gateway: w.Gateway, MaxConcurrentReconciles: o.MaxConcurrentReconciles, Events: w.ProviderEvents,
		Ledger: led, Thin: thin,
	}
	if sweep {
		w.Payments.OverdueSource = w.Sweep.Source()
	}
	w.Inbox = &WebhookEventReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
		Clock: clk, Gateway: w.Gateway, PendingGrace: o.PendingGrace, MaxConcurrentReconciles: o.InboxMaxConcurrentReconciles,
		Thin: thin,
	}
	w.FinishedEvents = &FinishedEvents{
		APIReader: mgr.GetAPIReader(), Client: writer, Clock: clk, Every: o.FinishedEventsEvery, Namespaces: o.Namespaces,
	}
	w.Providers = &PaymentProviderReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Secrets: secrets, Scheme: mgr.GetScheme(), Recorder: rec,
		Clock: clk, Gateway: w.Gateway, Events: w.ProviderEvents,
	}
	w.Bundles = &WebhookBundleReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Secrets: secrets, Namespace: o.BundleNamespace,
	}
	w.Backfill = &Backfill{
		Client: writer, Reader: reader, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: rec, Clock: clk, Gateway: w.Gateway,
	}
	w.Retention = &Retention{Client: writer, Thin: thin, APIReader: mgr.GetAPIReader(), Recorder: rec, Clock: clk, Ledger: led, Horizon: o.RetentionHorizon}
	w.Refunds = &RefundReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
		Clock: clk, Gateway: w.Gateway, Ledger: led, Thin: thin,
	}
	return w, nil
}

// paymentReads adds the thin cache of every Payment to mgr and builds the
// client every controller reads Payments through: open ones from the
// manager's cache, closed ones found through the thin cache and read from
// the API server.
func paymentReads(mgr ctrl.Manager, namespaces []string) (*paymentcache.Cache, client.Client, error) {
	thin, err := paymentcache.New(mgr, paymentcache.Options{Namespaces: namespaces, Indexes: PaymentLookups(), Wake: wakeAtStart})
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(thin); err != nil {
		return nil, nil, fmt.Errorf("thin payment cache: %w", err)
	}
	return thin, paymentcache.NewClient(mgr.GetClient(), thin, mgr.GetAPIReader(), lookupIndexes), nil
}

// lookupIndexes are the Payment indexes a look-up of an order or a
// provider's id goes through: they find closed payments too.
var lookupIndexes = []string{inbox.IndexPaymentMerchantRef, inbox.IndexPaymentProviderID, IndexPaymentIdempotencyKey}

// PaymentLookups are the indexes of the thin cache of Payments
// (internal/paymentcache): the look-ups.
func PaymentLookups() map[string]client.IndexerFunc {
	idx := inbox.PaymentIndexes()
	idx[IndexPaymentIdempotencyKey] = idempotencyKeyKeys
	return idx
}

// setupInbox registers the inbox processor, which handles open events, and
// the pass that deletes finished ones past retention.
func (w *Wiring) setupInbox(mgr ctrl.Manager) error {
	if err := w.Inbox.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(w.FinishedEvents)
}
