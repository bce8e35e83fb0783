// Command devenv runs paywarden locally (`make dev`): a local control plane,
// the CRDs, paysim, the manager and the webhook receiver, and a demo namespace
// of Payments whose payer and operator steps are played out and printed.
// Ctrl-C stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/devenv"
)

func main() {
	dir := flag.String("dir", "", "directory for the kubeconfig, binaries and logs (default bin/dev)")
	factor := flag.Float64("time-factor", 0.1, "paysim's time factor: 0.1 makes a simulated 30 s outcome take 3 s")
	pause := flag.Duration("pause", 10*time.Second, "how long a story's cue (the payer's link, an Authorized payment) stays visible before the payer or operator acts")
	flag.Parse()
	if err := run(*dir, *factor, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(dir string, factor float64, pause time.Duration) error {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := devenv.Start(ctx, devenv.Options{Root: root, Dir: dir, TimeFactor: factor, Pause: pause, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Print(env.Instructions())
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\ndev: stopping manager, receiver, paysim and the control plane")
	env.Stop()
	return nil
}
