// Command receiver runs paywarden's webhook receiver: a stateless HTTP service
// that verifies provider webhooks, stores them in the WebhookEvent inbox and
// applies them to Payments. It runs no controllers and needs no leader
// election; run as many replicas as the traffic needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/webhookreceiver"
)

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// run parses args, wires the receiver onto a manager and serves until ctx is
// done (SIGTERM in production), then drains in-flight requests.
func run(ctx context.Context, args []string) error {
	var (
		bindAddr, metricsAddr, namespaces string
		opts                              webhookreceiver.Options
	)
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	config.RegisterFlags(fs) // --kubeconfig
	fs.StringVar(&bindAddr, "bind-address", ":8080", "Address of the webhook server (/webhooks/, /healthz, /readyz).")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8081", `Address of the metrics server; "" serves /metrics on --bind-address, "0" disables metrics. Keep it separate when the webhook port is exposed to the internet.`)
	fs.StringVar(&namespaces, "namespace", "", "Comma-separated namespaces to serve and cache; empty serves the whole cluster.")
	fs.StringVar(&opts.BundleNamespace, "bundle-namespace", defaultBundleNamespace(), "Namespace of the webhook verification bundles the manager maintains (the manager's --bundle-namespace); the only namespace whose Secrets the receiver reads. Default: $POD_NAMESPACE, else paywarden-system.")
	fs.DurationVar(&opts.ApplyBudget, "apply-budget", webhookreceiver.DefaultApplyBudget, "Time allowed to apply a stored event before it is left Pending for the manager's inbox processor.")
	fs.DurationVar(&opts.StoreTimeout, "store-timeout", webhookreceiver.DefaultStoreTimeout, "Time allowed to store an event before answering 503.")
	fs.DurationVar(&opts.ReadTimeout, "read-timeout", webhookreceiver.DefaultReadTimeout, "Time allowed to read a request, body included.")
	fs.DurationVar(&opts.BodyReadTimeout, "body-read-timeout", webhookreceiver.DefaultBodyReadTimeout, "Time allowed to read the rest of a body after its first byte (within --read-timeout); a slower body is answered 408 and frees its in-flight slot.")
	fs.DurationVar(&opts.ReadHeaderTimeout, "read-header-timeout", webhookreceiver.DefaultReadHeaderTimeout, "Time allowed to read request headers.")
	fs.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", webhookreceiver.DefaultShutdownTimeout, "Time allowed to finish in-flight requests on shutdown.")
	fs.DurationVar(&opts.RetryAfter, "retry-after", webhookreceiver.DefaultRetryAfter, "Retry-After sent with 503 answers.")
	fs.IntVar(&opts.MaxHeaderBytes, "max-header-bytes", webhookreceiver.DefaultMaxHeaderBytes, "Largest request line and headers accepted; more is answered 431.")
	fs.IntVar(&opts.MaxConcurrentRequests, "max-concurrent-requests", webhookreceiver.DefaultMaxConcurrentRequests, "Webhook requests read (past their first body byte), verified, stored or applied at once; more are answered 503 with Retry-After without reading their body.")
	fs.IntVar(&opts.MaxConcurrentRequestsPerProvider, "max-concurrent-requests-per-provider", 0, "Of --max-concurrent-requests, the most one PaymentProvider may hold; more of its requests are answered 503 with Retry-After, so a flood to one provider's URL leaves the rest to the others. 0: a quarter of --max-concurrent-requests (64 of 256).")
	fs.Int64Var(&opts.MaxBodyBytesInFlight, "max-body-bytes-in-flight", webhookreceiver.DefaultMaxBodyBytesInFlight, "Body bytes the requests past their first body byte may hold in memory (each reserves its Content-Length, else twice its provider's maxBodyBytes); more are answered 503 with Retry-After without reading their body. A provider may hold the same share of it as of --max-concurrent-requests. Keep it well below the memory limit.")
	fs.Float64Var(&opts.VerifyQPS, "verify-qps", webhookreceiver.DefaultVerifyQPS, "Per provider, steady rate of signature verifications that call the provider's API (PayPal); beyond it requests are answered 503 with Retry-After.")
	fs.IntVar(&opts.VerifyBurst, "verify-burst", webhookreceiver.DefaultVerifyBurst, "Per provider, burst of signature verifications that call the provider's API.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := metrics.RegisterWebhook(ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if err := webhookreceiver.RegisterMetrics(ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}

	cacheOpts := cache.Options{
		// Managed fields are the bulk of most objects and never read here.
		DefaultTransform: cache.TransformStripManagedFields(),
		// Every type the receiver reads has its informer set up front; a read
		// of anything else (the inbox, say) is a bug, not a lazy informer.
		ReaderFailOnMissingInformer: true,
	}
	for _, ns := range strings.Split(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			if cacheOpts.DefaultNamespaces == nil {
				cacheOpts.DefaultNamespaces = map[string]cache.Config{}
			}
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
			opts.Namespaces = append(opts.Namespaces, ns)
		}
	}
	// Secrets: only the verification bundles in --bundle-namespace, whatever
	// --namespace says; tenant Secrets are never read.
	cacheOpts = webhookreceiver.CacheOptions(cacheOpts, opts.BundleNamespace)
	serveMetrics := metricsAddr
	if metricsAddr == "" {
		serveMetrics = "0"
		opts.Gatherer = ctrlmetrics.Registry
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// The receiver must come up while the API server is unreachable and
	// answer 503 with Retry-After, not crash-loop into connection refused:
	// ManagerOptions needs no discovery and does not hold the receiver
	// back until the caches sync.
	mgr, err := ctrl.NewManager(cfg, webhookreceiver.ManagerOptions(ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: serveMetrics},
		HealthProbeBindAddress:  "0", // served by the webhook server itself
		LeaderElection:          false,
		GracefulShutdownTimeout: ptr(opts.ShutdownTimeout + 5*time.Second),
	}))
	if err != nil {
		return fmt.Errorf("build manager: %w", err)
	}
	opts.Addr = bindAddr
	if _, err := webhookreceiver.SetupWithManager(ctx, mgr, opts); err != nil {
		return err
	}
	log.Info("starting webhook receiver", "bindAddress", bindAddr, "metricsBindAddress", metricsAddr, "namespaces", opts.Namespaces, "bundleNamespace", opts.BundleNamespace,
		"applyBudget", opts.ApplyBudget, "storeTimeout", opts.StoreTimeout,
		"bodyReadTimeout", opts.BodyReadTimeout, "maxConcurrentRequests", opts.MaxConcurrentRequests, "verifyQPS", opts.VerifyQPS, "verifyBurst", opts.VerifyBurst)
	return mgr.Start(ctx)
}

func ptr[T any](v T) *T { return &v }

// defaultBundleNamespace is the pod's namespace (the Deployment sets
// POD_NAMESPACE from the downward API), where the manager, in the same
// namespace, writes the bundles.
func defaultBundleNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "paywarden-system"
}
