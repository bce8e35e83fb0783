// Command manager runs paywarden's controllers: the Payment reconciler (create
// and status queries), the inbox processor, the PaymentProvider controller, the
// webhook verification bundles, the overdue sweep, the events-API backfill and
// retention, with leader election, health probes and a Prometheus metrics
// endpoint. It runs against any kubeconfig (--kubeconfig, $KUBECONFIG,
// in-cluster config).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/ledger"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/scheme"
)

func main() {
	var (
		metricsAddr  string
		probeAddr    string
		election     election
		bundleNS     string
		ledgerKeep   time.Duration
		workers      int
		showVersions bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&election.enabled, "leader-elect", false, "Elect a leader so that only one manager replica acts at a time (enable when running more than one).")
	flag.StringVar(&election.namespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the leader-election Lease. Default: $POD_NAMESPACE (the Deployment sets it), else the namespace of the in-cluster ServiceAccount.")
	flag.DurationVar(&election.lease, "leader-election-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before it takes the Lease (how long nobody leads after a leader dies without releasing it).")
	flag.DurationVar(&election.renew, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew the Lease before it stops acting and exits; below the lease duration.")
	flag.DurationVar(&election.retry, "leader-election-retry-period", 2*time.Second, "How often replicas try to take or renew the Lease.")
	flag.StringVar(&bundleNS, "bundle-namespace", defaultBundleNamespace(), "Namespace where the webhook verification bundles are kept for the receiver (the receiver's --bundle-namespace). Default: $POD_NAMESPACE, else paywarden-system.")
	flag.DurationVar(&ledgerKeep, "ledger-retention", ledger.DefaultRetention, "How long the ledger remembers a settled Payment or Refund after its object was deleted (kept in ConfigMaps paywarden-ledger-* of the bundle namespace): an object of the same order applied again within it adopts the outcome instead of moving money again.")
	flag.IntVar(&workers, "max-concurrent-reconciles", 4, "Payments reconciled in parallel. Provider calls are bounded by each PaymentProvider's qps/burst regardless.")
	flag.BoolVar(&showVersions, "version", false, "Print the version and exit.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\nRuns the paywarden controllers against the cluster of the current kubeconfig\n(--kubeconfig, $KUBECONFIG or in-cluster).\n\nFlags:\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if showVersions {
		fmt.Println("paywarden manager", version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(metricsAddr, probeAddr, election, bundleNS, workers, ledgerKeep); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

var version = "dev"

// defaultBundleNamespace is the pod's namespace (the Deployment sets
// POD_NAMESPACE from the downward API).
func defaultBundleNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "paywarden-system"
}

// election is the leader election's configuration (--leader-elect and its
// timings, controller-runtime's defaults).
type election struct {
	enabled             bool
	namespace           string
	lease, renew, retry time.Duration
}

func run(metricsAddr, probeAddr string, election election, bundleNS string, workers int, ledgerKeep time.Duration) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(),
		// Secrets: metadata-only watches and reads by name from the API
		// server; the cache never holds a Secret's data (controllers/secrets.go).
		Cache:                   controllers.CacheOptions(bundleNS),
		Client:                  controllers.ClientOptions(),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          election.enabled,
		LeaderElectionID:        "manager.paywarden.dev",
		LeaderElectionNamespace: election.namespace,
		LeaseDuration:           &election.lease,
		RenewDeadline:           &election.renew,
		RetryPeriod:             &election.retry,
		// The Lease is released on a clean shutdown, so a new leader takes
		// over at once instead of waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	// The cache-derived gauges are reported by the leader only, so sums over
	// replicas do not double.
	leader := &controllers.LeaderFlag{}
	if err := mgr.Add(leader); err != nil {
		return err
	}
	w, err := controllers.Setup(mgr, controllers.Options{MaxConcurrentReconciles: workers, BundleNamespace: bundleNS, LedgerRetention: ledgerKeep})
	if err != nil {
		return err
	}
	if err := controllers.RegisterMetrics(crmetrics.Registry, paymentcache.Counting{Reader: mgr.GetCache(), Thin: w.PaymentCache}, leader.IsLeader, w.FinishedEvents); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "version", version, "leaderElection", election.enabled, "bundleNamespace", bundleNS)
	return mgr.Start(ctrl.SetupSignalHandler())
}
