// Command manager runs paywarden's controllers: the Payment reconciler (create
// and status queries), the inbox processor, the PaymentProvider controller, the
// overdue sweep, the events-API backfill and retention, with leader election,
// health probes and a Prometheus metrics endpoint. It runs against any kubeconfig (--kubeconfig, $KUBECONFIG,
// in-cluster config).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/scheme"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

func main() {
	var (
		metricsAddr  string
		probeAddr    string
		leaderElect  bool
		leaderNS     string
		workers      int
		showVersions bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica acts at a time (enable when running more than one).")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's namespace).")
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
	if err := run(metricsAddr, probeAddr, leaderElect, leaderNS, workers); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

var version = "dev"

func run(metricsAddr, probeAddr string, leaderElect bool, leaderNS string, workers int) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
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
	if err := metrics.RegisterShared(crmetrics.Registry); err != nil {
		return err
	}
	if err := metrics.RegisterManager(crmetrics.Registry); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(controllers.PaymentCollector{Reader: mgr.GetCache()}); err != nil {
		return err
	}
	// One gateway: status queries, backfill and the inbox share each
	// provider's rate limit and circuit breaker.
	rec := mgr.GetEventRecorder("paywarden-manager")
	realClock := clock.RealClock{}
	// A configuration a provider refuses (401/403, a redirect) is noticed by
	// the gateway on a call and reported by the provider controller at once.
	provEvents := &controllers.ProviderEvents{}
	gw := &gateway.Gateway{
		Reader:   mgr.GetClient(),
		Status:   statuswriter.Writer{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		Recorder: rec, Clock: realClock, Notify: provEvents.Notify,
	}
	// The inbox's Payment indexes serve the inbox processor and the backfill.
	if err := inbox.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("inbox indexes: %w", err)
	}
	sweep := &controllers.Sweep{Client: mgr.GetClient(), Recorder: rec, Clock: realClock}
	if err := sweep.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	setups := []struct {
		name  string
		setup func(ctrl.Manager) error
	}{
		{"payment controller", (&controllers.PaymentReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
			Clock: realClock, Gateway: gw, MaxConcurrentReconciles: workers, OverdueSource: sweep.Source(), Events: provEvents,
		}).SetupWithManager},
		{"inbox processor", (&controllers.WebhookEventReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
			Clock: realClock, Gateway: gw,
		}).SetupWithManager},
		{"provider controller", (&controllers.PaymentProviderReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
			Clock: realClock, Gateway: gw, Events: provEvents,
		}).SetupWithManager},
		{"backfill", (&controllers.Backfill{
			Client: mgr.GetClient(), Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
			Recorder: rec, Clock: realClock, Gateway: gw,
		}).SetupWithManager},
		{"refund controller", (&controllers.RefundReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec,
			Clock: realClock, Gateway: gw,
		}).SetupWithManager},
		{"retention", (&controllers.Retention{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Clock: realClock,
		}).SetupWithManager},
	}
	for _, s := range setups {
		if err := s.setup(mgr); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "version", version, "leaderElection", leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}
