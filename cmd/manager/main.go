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
	"github.com/paywarden/paywarden/internal/scheme"
)

func main() {
	var (
		metricsAddr  string
		probeAddr    string
		leaderElect  bool
		leaderNS     string
		bundleNS     string
		ledgerKeep   time.Duration
		workers      int
		showVersions bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica acts at a time (enable when running more than one).")
	flag.StringVar(&leaderNS, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the leader-election Lease. Default: $POD_NAMESPACE (the Deployment sets it), else the namespace of the in-cluster ServiceAccount.")
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
	if err := run(metricsAddr, probeAddr, leaderElect, leaderNS, bundleNS, workers, ledgerKeep); err != nil {
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

func run(metricsAddr, probeAddr string, leaderElect bool, leaderNS, bundleNS string, workers int, ledgerKeep time.Duration) error {
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
		LeaderElection:          leaderElect,
		LeaderElectionID:        "manager.paywarden.dev",
		LeaderElectionNamespace: leaderNS,
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
	if err := controllers.RegisterMetrics(crmetrics.Registry, mgr.GetCache(), leader.IsLeader); err != nil {
		return err
	}
	if _, err := controllers.Setup(mgr, controllers.Options{MaxConcurrentReconciles: workers, BundleNamespace: bundleNS, LedgerRetention: ledgerKeep}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "version", version, "leaderElection", leaderElect, "bundleNamespace", bundleNS)
	return mgr.Start(ctrl.SetupSignalHandler())
}
