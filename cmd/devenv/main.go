// Command devenv runs paywarden locally (`make dev`): a local control plane,
// the CRDs, paysim, the manager and the webhook receiver, and a demo namespace
// of Payments. Ctrl-C stops everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/paywarden/paywarden/internal/devenv"
	"github.com/paywarden/paywarden/internal/testenv"
)

func main() {
	dir := flag.String("dir", "", "directory for the kubeconfig, binaries and logs (default bin/dev)")
	factor := flag.Float64("time-factor", 0.1, "paysim's time factor: 0.1 makes a simulated 30 s outcome take 3 s")
	flag.Parse()
	if err := run(*dir, *factor); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(dir string, factor float64) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := devenv.Start(ctx, devenv.Options{Root: root, Dir: dir, TimeFactor: factor, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Print(env.Instructions())
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\ndev: stopping manager, receiver, paysim and the control plane")
	env.Stop()
	return nil
}
