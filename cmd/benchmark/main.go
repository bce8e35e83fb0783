// Command benchmark runs paywarden's end-to-end benchmark (`make bench`, see
// docs/performance.md and test/bench): a local control plane, paysim, and the
// manager and receiver of a source tree as separate processes. It prints a
// table and writes the results as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/test/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	var (
		opts    bench.Options
		out     string
		before  string
		senders string
	)
	flag.StringVar(&opts.Src, "src", root, "source tree whose cmd/manager and cmd/receiver are built and measured (another checkout measures its binaries)")
	flag.StringVar(&opts.Dir, "dir", filepath.Join(root, "bin", "bench", "run"), "directory for binaries, logs and the kubeconfig")
	flag.StringVar(&out, "out", filepath.Join(root, "bin", "bench", "results.json"), "where to write the results as JSON")
	flag.StringVar(&before, "before", "", "results JSON of an earlier run (e.g. of the old main) to print next to this one")
	flag.StringVar(&senders, "senders", "1,8,32", "closed-loop concurrent senders, comma-separated")
	flag.IntVar(&opts.Events, "events", 1000, "new events per closed-loop run")
	flag.Float64Var(&opts.OpenSeconds, "open-seconds", 20, "length of each open-loop run")
	flag.IntVar(&opts.Happy, "happy", 100, "payments per happy-path case")
	flag.IntVar(&opts.InFlightSmall, "inflight-small", 1000, "in-flight payments of the first manager RSS figure")
	flag.IntVar(&opts.InFlightLarge, "inflight-large", 10000, "in-flight payments of the second RSS figure, all due at once (the backlog)")
	flag.IntVar(&opts.Retained, "retained", 0, "also measure the manager's RSS with this many settled Payments and finished WebhookEvents (takes minutes; 0 skips it)")
	flag.StringVar(&opts.Only, "only", "", "run only this phase: receiver, happy, manager, retained (with -retained) or priorities")
	qps := flag.Int("backlog-qps", 50, "the backlog provider's qps")
	burst := flag.Int("backlog-burst", 100, "the backlog provider's burst")
	flag.Parse()
	opts.Root = root
	opts.BacklogQPS, opts.BacklogBurst = int32(*qps), int32(*burst)
	for _, s := range strings.Split(senders, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-senders: %q is not a positive number", s)
		}
		opts.Senders = append(opts.Senders, n)
	}
	if opts.Src, err = filepath.Abs(opts.Src); err != nil {
		return err
	}
	var prev *bench.Results
	if before != "" {
		b, err := os.ReadFile(before)
		if err != nil {
			return err
		}
		prev = &bench.Results{}
		if err := json.Unmarshal(b, prev); err != nil {
			return fmt.Errorf("-before %s: %w", before, err)
		}
	}
	if err := os.RemoveAll(opts.Dir); err != nil {
		return err
	}
	opts.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, runErr := bench.Run(ctx, opts)
	if res == nil {
		return runErr
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("%w (partial results in %s)", runErr, out)
	}
	bench.WriteTable(os.Stdout, res, prev)
	fmt.Printf("\nresults: %s\n", out)
	return nil
}
