// Package plugin is `kubectl paywarden`, the operator's console: which
// payments wait and for what (stuck), one payment's whole story (why), the
// operator's actions (capture, cancel, requery, resolve, refund; requery and
// resolve of a Refund; a PaymentProvider's one-off backfill) checked by the
// manager's own rules before anything is written and followed until the
// manager acted, and counts per phase (summary).
//
// It only reads the API and writes what an operator could write with
// kubectl: the annotations the manager understands and Refunds. The reports
// are pure functions of the objects read (Stuck, Why, Summarize) and the
// actions are decided by pure functions (PlanCapture, ..., PlanRefund,
// PlanRefundResolve, PlanBackfill) over internal/payment's rules; the
// commands are I/O around them.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/scheme"
)

// ErrNotFound: the object named does not exist (any more).
var ErrNotFound = errors.New("not found")

// ExitError ends a command with a status and nothing more to say: what
// needed saying was printed.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Run runs kubectl paywarden with args and returns its exit status: 0, or 1
// when a command failed, an action was refused or did not end as asked, or
// stuck found a payment that needs a human.
func Run(args []string, streams genericiooptions.IOStreams) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var exit ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	return 1
}

// options are what every command shares: the kubeconfig flags of
// cli-runtime and the clock.
type options struct {
	genericiooptions.IOStreams
	flags *genericclioptions.ConfigFlags
	// nowFlag pins the clock (hidden; tests and reproducible reports).
	nowFlag string
}

// pollInterval is how often a following command reads what the manager
// did: two reads each time stay within client-go's default rate limit.
const pollInterval = 500 * time.Millisecond

// NewCommand builds the command tree.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{IOStreams: streams, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-paywarden",
		Short: "The operator's console for paywarden payments",
		Long: `kubectl paywarden finds the payments that wait and says why, tells one payment's
whole story, and acts on payments, refunds and providers the way the manager
understands: amounts in major units of the payment's currency, checked before
anything is written.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl paywarden"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.nowFlag, "now", "", "the time reports are relative to (RFC 3339); default now")
	_ = root.PersistentFlags().MarkHidden("now")
	_ = root.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)
	root.AddCommand(o.stuckCmd(), o.whyCmd(), o.summaryCmd(), o.captureCmd(), o.cancelCmd(), o.requeryCmd(), o.resolveCmd(), o.refundCmd(), o.backfillCmd())
	return root
}

func (o *options) now() (time.Time, error) {
	if o.nowFlag == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, o.nowFlag)
	if err != nil {
		return t, fmt.Errorf("--now: %w", err)
	}
	return t, nil
}

func (o *options) client() (client.Client, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// session is what a command works with: a client, the namespace and the clock.
type session struct {
	c   client.Client
	ns  string
	now time.Time
}

func (o *options) session() (*session, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	now, err := o.now()
	if err != nil {
		return nil, err
	}
	return &session{c: c, ns: ns, now: now}, nil
}

// listFlags are -A and -l of the commands that read many payments.
type listFlags struct {
	allNamespaces bool
	selector      string
}

func (l *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&l.allNamespaces, "all-namespaces", "A", false, "payments of every namespace")
	cmd.Flags().StringVarP(&l.selector, "selector", "l", "", "only payments with these labels (e.g. team=checkout)")
}

func (s *session) payments(ctx context.Context, l listFlags) ([]v1alpha1.Payment, error) {
	var opts []client.ListOption
	if !l.allNamespaces {
		opts = append(opts, client.InNamespace(s.ns))
	}
	if l.selector != "" {
		sel, err := labels.Parse(l.selector)
		if err != nil {
			return nil, fmt.Errorf("--selector: %w", err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	var list v1alpha1.PaymentList
	if err := s.c.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list payments: %w", err)
	}
	return list.Items, nil
}

func (s *session) payment(ctx context.Context, name string) (*v1alpha1.Payment, error) {
	return getNamed(ctx, s, "payment", name, &v1alpha1.Payment{})
}

func (s *session) refund(ctx context.Context, name string) (*v1alpha1.Refund, error) {
	return getNamed(ctx, s, "refund", name, &v1alpha1.Refund{})
}

func (s *session) provider(ctx context.Context, name string) (*v1alpha1.PaymentProvider, error) {
	return getNamed(ctx, s, "paymentprovider", name, &v1alpha1.PaymentProvider{})
}

// getNamed reads the object of kind named name in the session's namespace
// into obj; one that is not there is ErrNotFound.
func getNamed[T client.Object](ctx context.Context, s *session, kind, name string, obj T) (T, error) {
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, obj); err != nil {
		var none T
		if apierrors.IsNotFound(err) {
			return none, fmt.Errorf("%s %s %w in namespace %s", kind, name, ErrNotFound, s.ns)
		}
		return none, fmt.Errorf("get %s %s/%s: %w", kind, s.ns, name, err)
	}
	return obj, nil
}

func (s *session) refunds(ctx context.Context, p *v1alpha1.Payment) ([]v1alpha1.Refund, error) {
	var list v1alpha1.RefundList
	if err := s.c.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		return nil, fmt.Errorf("list refunds: %w", err)
	}
	var out []v1alpha1.Refund
	for _, rf := range list.Items {
		if rf.Spec.PaymentRef.Name == p.Name {
			out = append(out, rf)
		}
	}
	return out, nil
}

// events are the Kubernetes Events (events.k8s.io) about the named objects
// of kind in the namespace.
func (s *session) events(ctx context.Context, ns, kind string, names ...string) ([]eventsv1.Event, error) {
	var out []eventsv1.Event
	for _, name := range names {
		var list eventsv1.EventList
		if err := s.c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"regarding.name": name}); err != nil {
			return nil, fmt.Errorf("list events about %s %s: %w", kind, name, err)
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (o *options) stuckCmd() *cobra.Command {
	var l listFlags
	var olderThan time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "stuck",
		Short: "List the payments that wait, grouped by why, each with the command that acts on it",
		Long: `stuck lists every payment that is not settled, or settled but waiting for a
human, grouped by what it waits for: a review (by reason), a capture, the
payer, a provider that refuses paywarden's configuration or does not answer,
a call in progress, the provider's final answer. Oldest first, each with the
one command that acts on it. Exit status 1 when any payment needs a human (a
review, or a provider configuration to fix), so it works as a cron or CI check.`,
		Example: `  kubectl paywarden stuck -A
  kubectl paywarden stuck -A --older-than 1h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, items, err := o.listPayments(cmd.Context(), output, l)
			if err != nil {
				return err
			}
			r := Stuck(items, s.now, olderThan)
			if output == OutputJSON || output == OutputYAML {
				err = WriteData(o.Out, output, r)
			} else {
				err = WriteStuck(o.Out, r, s.now, l.allNamespaces, output == OutputWide)
			}
			if err == nil && r.NeedsHuman > 0 {
				return ExitError{Code: 1}
			}
			return err
		},
	}
	l.add(cmd)
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only payments waiting at least this long (e.g. 15m)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

// listPayments lists the payments l selects, for a report written as output
// (text, wide, json or yaml), and returns the session it used.
func (o *options) listPayments(ctx context.Context, output string, l listFlags) (*session, []v1alpha1.Payment, error) {
	if err := validOutput(output, OutputText, OutputWide, OutputJSON, OutputYAML); err != nil {
		return nil, nil, err
	}
	s, err := o.session()
	if err != nil {
		return nil, nil, err
	}
	items, err := s.payments(ctx, l)
	if err != nil {
		return nil, nil, err
	}
	return s, items, nil
}

func (o *options) whyCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "why PAYMENT",
		Short: "Tell one payment's story: history, Events, webhooks, refunds, and what happens next",
		Long: `why merges the payment's status history, the Kubernetes Events about it and its
Refunds, the WebhookEvents about it (with what became of them), its Refunds
and what is scheduled into one timeline, and closes with what paywarden will
do next and when, or what a human must decide.`,
		Example:           `  kubectl paywarden why amount-mismatch -n demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validOutput(output, OutputText, OutputJSON, OutputYAML); err != nil {
				return err
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			in := WhyInput{}
			if in.Payment, err = s.payment(ctx, args[0]); err != nil {
				return err
			}
			if in.Refunds, err = s.refunds(ctx, in.Payment); err != nil {
				return err
			}
			var inbox v1alpha1.WebhookEventList
			if err := s.c.List(ctx, &inbox, client.InNamespace(s.ns)); err != nil {
				return fmt.Errorf("list webhookevents: %w", err)
			}
			in.WebhookEvents = inbox.Items
			if in.Events, err = s.events(ctx, s.ns, "Payment", in.Payment.Name); err != nil {
				return err
			}
			var names []string
			for _, rf := range in.Refunds {
				names = append(names, rf.Name)
			}
			more, err := s.events(ctx, s.ns, "Refund", names...)
			if err != nil {
				return err
			}
			in.Events = append(in.Events, more...)
			r := Why(in, s.now)
			if output != OutputText {
				return WriteData(o.Out, output, r)
			}
			return WriteWhy(o.Out, r, s.now)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	return cmd
}

func (o *options) summaryCmd() *cobra.Command {
	var l listFlags
	var output string
	cmd := &cobra.Command{
		Use:   "summary",
		Short: "Count payments and their amounts per phase, provider and currency; Unknown first",
		Example: `  kubectl paywarden summary -A
  kubectl paywarden summary -A -o wide   # one row per namespace too`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, items, err := o.listPayments(cmd.Context(), output, l)
			if err != nil {
				return err
			}
			r := Summarize(items, output == OutputWide)
			if output == OutputJSON || output == OutputYAML {
				return WriteData(o.Out, output, r)
			}
			return WriteSummary(o.Out, r, output == OutputWide)
		},
	}
	l.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide (per namespace), json or yaml")
	return cmd
}

// followFlags are --wait, --timeout and -o of the actions.
type followFlags struct {
	wait    bool
	timeout time.Duration
	output  string
}

func (f *followFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.wait, "wait", true, "wait until the manager acted, and print the outcome")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "print the object at the end as json or yaml (messages go to stderr)")
}

func (o *options) captureCmd() *cobra.Command {
	var amountText string
	var f followFlags
	cmd := &cobra.Command{
		Use:   "capture PAYMENT",
		Short: "Capture an authorized payment (captureMethod Manual), all of it or --amount in major units",
		Example: `  kubectl paywarden capture manual-capture -n demo                 # everything authorized
  kubectl paywarden capture manual-capture -n demo --amount 30.00  # part of it; the rest is released`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(func(p *v1alpha1.Payment) bool { return p.Spec.ManualCapture() && !p.Status.Phase.IsFinal() }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.actOnPayment(cmd.Context(), args[0], f, func(p *v1alpha1.Payment, now time.Time) (Request, error) {
				return PlanCapture(p, amountText, now)
			})
		},
	}
	cmd.Flags().StringVar(&amountText, "amount", "", "amount to capture in major units of the payment's currency (e.g. 30.00); default everything authorized")
	f.add(cmd)
	return cmd
}

func (o *options) cancelCmd() *cobra.Command {
	var reason string
	var f followFlags
	cmd := &cobra.Command{
		Use:               "cancel PAYMENT --reason TEXT",
		Short:             "Cancel a payment that has not taken money (void its authorization)",
		Example:           `  kubectl paywarden cancel canceled -n demo --reason "customer changed their mind"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(func(p *v1alpha1.Payment) bool { return !p.Status.Phase.IsFinal() }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.actOnPayment(cmd.Context(), args[0], f, func(p *v1alpha1.Payment, now time.Time) (Request, error) {
				return PlanCancel(p, reason, now)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the payment's history); required")
	_ = cmd.MarkFlagRequired("reason")
	f.add(cmd)
	return cmd
}

func (o *options) requeryCmd() *cobra.Command {
	var f followFlags
	cmd := &cobra.Command{
		Use:   "requery (PAYMENT | refund/REFUND)",
		Short: "Query the provider now and restart the query schedule of a payment or a refund (also takes an Unknown one back)",
		Example: `  kubectl paywarden requery webhook-lost -n demo
  kubectl paywarden requery refund/order-x7k2p -n shop`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: o.completeTargets(func(p *v1alpha1.Payment) bool { return !p.Status.Phase.IsFinal() },
			func(rf *v1alpha1.Refund) bool { return !rf.Status.Phase.IsFinal() }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.actOnTarget(cmd.Context(), "requery", args[0], f, PlanRequery, PlanRefundRequery)
		},
	}
	f.add(cmd)
	return cmd
}

func (o *options) resolveCmd() *cobra.Command {
	var to, reason string
	var f followFlags
	cmd := &cobra.Command{
		Use:   "resolve (PAYMENT | refund/REFUND) --phase PHASE --reason TEXT",
		Short: "Settle a payment or a refund by hand with what the provider's dashboard shows; clears NeedsReview",
		Long: `resolve settles a payment (--phase Succeeded, Failed, Expired or Canceled) or,
named refund/NAME, a refund (--phase Succeeded or Failed) by hand, with what
the provider's dashboard shows. The reason is recorded in its history and
NeedsReview is cleared.`,
		Example: `  kubectl paywarden resolve amount-mismatch -n demo --phase Succeeded --reason "customer paid the rest by bank transfer, OPS-123"
  kubectl paywarden resolve refund/order-x7k2p -n shop --phase Succeeded --reason "refund re_123 seen in the dashboard, OPS-42"`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: o.completeTargets(func(p *v1alpha1.Payment) bool { return !p.Status.Phase.IsFinal() || needsReview(p) },
			func(rf *v1alpha1.Refund) bool {
				return !rf.Status.Phase.IsFinal() || meta.IsStatusConditionTrue(rf.Status.Conditions, v1alpha1.ConditionNeedsReview)
			}),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.actOnTarget(cmd.Context(), "resolve", args[0], f,
				func(p *v1alpha1.Payment, now time.Time) (Request, error) { return PlanResolve(p, to, reason, now) },
				func(rf *v1alpha1.Refund, now time.Time) (Request, error) {
					return PlanRefundResolve(rf, to, reason, now)
				})
		},
	}
	cmd.Flags().StringVar(&to, "phase", "", "the phase to settle in: "+strings.Join(ResolvePhases, ", ")+" (a refund: "+strings.Join(RefundResolvePhases, ", ")+")")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the history); required")
	_ = cmd.MarkFlagRequired("phase")
	_ = cmd.MarkFlagRequired("reason")
	_ = cmd.RegisterFlagCompletionFunc("phase", func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			if kind, _, err := objectArg("resolve", args[0]); err == nil && kind == kindRefund {
				return RefundResolvePhases, cobra.ShellCompDirectiveNoFileComp
			}
		}
		return ResolvePhases, cobra.ShellCompDirectiveNoFileComp
	})
	f.add(cmd)
	return cmd
}

func (o *options) backfillCmd() *cobra.Command {
	var from string
	var f followFlags
	cmd := &cobra.Command{
		Use:   "backfill PROVIDER --from TIME|DURATION",
		Short: "Replay a PaymentProvider's events from a point in time once (after a webhook outage), and follow it",
		Long: `backfill asks the manager to replay the provider's events created since --from
(an RFC 3339 time, or how far back: 2h) once, through the inbox: events
already stored are skipped, the others applied. It writes the annotation
payments.paywarden.dev/backfill-from and waits until the manager recorded it
in backfill-from-done, then prints the Backfill condition. The same time
asked again runs again. See docs/runbook-webhook-outage.md.`,
		Example: `  kubectl paywarden backfill kukopay -n shop --from 2026-05-01T08:00:00Z
  kubectl paywarden backfill kukopay -n shop --from 6h`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeProviders,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.backfill(cmd.Context(), args[0], from, f)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "replay the events since this RFC 3339 time, or this long ago (e.g. 2h); required")
	_ = cmd.MarkFlagRequired("from")
	f.add(cmd)
	cmd.Flags().Lookup("wait").Usage = "wait until the manager replayed the events, and print the outcome"
	return cmd
}

func (o *options) refundCmd() *cobra.Command {
	var amountText, reason string
	var all bool
	var f followFlags
	cmd := &cobra.Command{
		Use:   "refund PAYMENT (--amount AMOUNT | --all)",
		Short: "Create a Refund of a payment, checked against what is still refundable, and follow it",
		Example: `  kubectl paywarden refund refunded -n demo --amount 15.00 --reason "one item returned"
  kubectl paywarden refund refunded -n demo --all`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(func(p *v1alpha1.Payment) bool { return p.Status.Phase.TookMoney() }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.refund(cmd.Context(), args[0], amountText, all, reason, f)
		},
	}
	cmd.Flags().StringVar(&amountText, "amount", "", "amount to refund in major units of the payment's currency (e.g. 15.00)")
	cmd.Flags().BoolVar(&all, "all", false, "refund everything still refundable")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded, and sent to the provider where it takes one)")
	cmd.MarkFlagsMutuallyExclusive("amount", "all")
	f.add(cmd)
	return cmd
}

// target is an object an action writes annotations on: how it is read,
// how the request is decided on it as it is, and how the manager's answer is
// read back (since is a little before the write, on the manager's clock).
type target[T client.Object] struct {
	kind, name string
	get        func(context.Context) (T, error)
	plan       func(T, time.Time) (Request, error)
	check      func(ctx context.Context, obj T, req Request, since time.Time) (Progress, error)
}

// act decides a request on the object as it is, writes its annotations
// only if the object did not change meanwhile (a conflict decides again on
// the new state), and follows the manager's answer.
func act[T client.Object](ctx context.Context, o *options, s *session, t target[T], f followFlags) error {
	var obj T
	var req Request
	var err error
	var written time.Time
	for attempt := 1; ; attempt++ {
		if obj, err = t.get(ctx); err != nil {
			return err
		}
		if req, err = t.plan(obj, s.now); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(T), client.MergeFromWithOptimisticLock{})
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		for k, v := range req.Set {
			annotations[k] = v
		}
		for _, k := range req.Unset {
			delete(annotations, k)
		}
		obj.SetAnnotations(annotations)
		written = time.Now()
		err = s.c.Patch(ctx, obj, patch)
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("write the %s annotation on %s %s/%s: %w", req.Verb, t.kind, s.ns, t.name, err)
		}
		break
	}
	msg := o.messages(f)
	fmt.Fprintf(msg, "%s %s/%s: %s (annotation %s)\n", t.kind, s.ns, t.name, req.Describe, annotationList(req))
	if req.Note != "" {
		fmt.Fprintf(msg, "note: %s\n", req.Note)
	}
	if !f.wait {
		return o.printObject(f, obj)
	}
	fmt.Fprintf(o.ErrOut, "waiting up to %s for the manager...\n", f.timeout)
	// The manager's clock is not this one: its refusal Events are taken
	// from a little before the write.
	since := written.Add(-2 * time.Second)
	pr, err := follow(ctx, f.timeout, func(ctx context.Context) (Progress, error) {
		got, err := t.get(ctx)
		if err != nil {
			return Progress{}, err
		}
		obj = got
		return t.check(ctx, obj, req, since)
	})
	if err != nil {
		return err
	}
	return o.outcome(f, pr, obj)
}

// actOnPayment acts on the named Payment with the request plan decides.
func (o *options) actOnPayment(ctx context.Context, name string, f followFlags, plan func(*v1alpha1.Payment, time.Time) (Request, error)) error {
	return actOn(ctx, o, "payment", "Payment", name, f, (*session).payment, plan, Check)
}

// actOnRefund acts on the named Refund with the request plan decides.
func (o *options) actOnRefund(ctx context.Context, name string, f followFlags, plan func(*v1alpha1.Refund, time.Time) (Request, error)) error {
	return actOn(ctx, o, "refund", "Refund", name, f, (*session).refund, plan, CheckRefundAction)
}

// actOn acts on the object of kind (eventKind in its Events) named name, read
// with get, with the request plan decides; progress says how far the manager
// got, given the refusal Event recorded since the write (nil when none).
func actOn[T client.Object](ctx context.Context, o *options, kind, eventKind, name string, f followFlags,
	get func(*session, context.Context, string) (T, error), plan func(T, time.Time) (Request, error),
	progress func(T, Request, *eventsv1.Event) Progress) error {
	if err := validOutput(f.output, OutputText, OutputJSON, OutputYAML); err != nil {
		return err
	}
	s, err := o.session()
	if err != nil {
		return err
	}
	return act(ctx, o, s, target[T]{
		kind: kind, name: name, plan: plan,
		get: func(ctx context.Context) (T, error) { return get(s, ctx, name) },
		check: func(ctx context.Context, obj T, req Request, since time.Time) (Progress, error) {
			pr := progress(obj, req, nil)
			if !pr.Done && strings.Contains(pr.Text, "has not acted") {
				return pr, nil
			}
			// Acted on: a refusal, if any, is an Event.
			events, err := s.events(ctx, s.ns, eventKind, name)
			if err != nil {
				return Progress{}, err
			}
			return progress(obj, req, Refusal(req.Verb, events, since)), nil
		},
	}, f)
}

// actOnTarget acts on a Payment or a Refund as arg names it (NAME,
// payment/NAME or refund/NAME).
func (o *options) actOnTarget(ctx context.Context, verb, arg string, f followFlags,
	onPayment func(*v1alpha1.Payment, time.Time) (Request, error), onRefund func(*v1alpha1.Refund, time.Time) (Request, error)) error {
	kind, name, err := objectArg(verb, arg)
	if err != nil {
		return err
	}
	if kind == kindRefund {
		return o.actOnRefund(ctx, name, f, onRefund)
	}
	return o.actOnPayment(ctx, name, f, onPayment)
}

const (
	kindPayment = "payment"
	kindRefund  = "refund"
)

// objectArg reads kubectl's TYPE/NAME for the actions that take a Payment
// or a Refund; a bare NAME is a Payment.
func objectArg(verb, arg string) (kind, name string, err error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok {
		typ, name = kindPayment, arg
	}
	switch {
	case name == "" || strings.Contains(name, "/"):
	case paymentTypes[strings.ToLower(typ)]:
		return kindPayment, name, nil
	case refundTypes[strings.ToLower(typ)]:
		return kindRefund, name, nil
	}
	return "", "", fmt.Errorf("%s takes a payment or a refund: NAME (a payment), payment/NAME or refund/NAME, not %q", verb, arg)
}

// paymentTypes and refundTypes are how kubectl names the kinds: kind,
// plural, short name, and the plural with its group.
var (
	paymentTypes = map[string]bool{"payment": true, "payments": true, "pay": true, "payments." + v1alpha1.GroupVersion.Group: true}
	refundTypes  = map[string]bool{"refund": true, "refunds": true, "rf": true, "refunds." + v1alpha1.GroupVersion.Group: true}
)

// backfill asks the manager for a one-off replay of the named
// PaymentProvider's events and follows it.
func (o *options) backfill(ctx context.Context, name, from string, f followFlags) error {
	if err := validOutput(f.output, OutputText, OutputJSON, OutputYAML); err != nil {
		return err
	}
	s, err := o.session()
	if err != nil {
		return err
	}
	return act(ctx, o, s, target[*v1alpha1.PaymentProvider]{
		kind: "paymentprovider", name: name,
		get: func(ctx context.Context) (*v1alpha1.PaymentProvider, error) { return s.provider(ctx, name) },
		plan: func(prov *v1alpha1.PaymentProvider, now time.Time) (Request, error) {
			return PlanBackfill(prov, from, now)
		},
		check: func(ctx context.Context, prov *v1alpha1.PaymentProvider, req Request, since time.Time) (Progress, error) {
			pr := CheckBackfill(prov, req, nil)
			if !pr.Done {
				return pr, nil
			}
			events, err := s.events(ctx, s.ns, "PaymentProvider", name)
			if err != nil {
				return Progress{}, err
			}
			return CheckBackfill(prov, req, Refusal(req.Verb, events, since)), nil
		},
	}, f)
}

func (o *options) refund(ctx context.Context, name, amountText string, all bool, reason string, f followFlags) error {
	if err := validOutput(f.output, OutputText, OutputJSON, OutputYAML); err != nil {
		return err
	}
	s, err := o.session()
	if err != nil {
		return err
	}
	p, err := s.payment(ctx, name)
	if err != nil {
		return err
	}
	siblings, err := s.refunds(ctx, p)
	if err != nil {
		return err
	}
	rf, describe, note, err := PlanRefund(p, siblings, amountText, all, reason, s.now)
	if err != nil {
		return err
	}
	if err := s.c.Create(ctx, rf); err != nil {
		return fmt.Errorf("create the refund of payment %s/%s: %w", s.ns, name, err)
	}
	msg := o.messages(f)
	fmt.Fprintf(msg, "refund %s/%s created: %s of payment %s\n", s.ns, rf.Name, describe, name)
	if note != "" {
		fmt.Fprintf(msg, "note: %s\n", note)
	}
	if !f.wait {
		return o.printObject(f, rf)
	}
	fmt.Fprintf(o.ErrOut, "waiting up to %s for the refund's final phase...\n", f.timeout)
	pr, err := follow(ctx, f.timeout, func(ctx context.Context) (Progress, error) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(rf), rf); err != nil {
			return Progress{}, fmt.Errorf("get refund %s/%s: %w", s.ns, rf.Name, err)
		}
		return CheckRefund(rf), nil
	})
	if err != nil {
		return err
	}
	return o.outcome(f, pr, rf)
}

// follow polls check until it is done or timeout passes; on a timeout the
// error says what it still waited for. A failed read is tried again (the
// API server may be busy); a deleted object ends the wait.
func follow(ctx context.Context, timeout time.Duration, check func(context.Context) (Progress, error)) (Progress, error) {
	var last Progress
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		pr, err := check(ctx)
		switch {
		case errors.Is(err, ErrNotFound) || apierrors.IsNotFound(err):
			return false, err
		case err != nil:
			lastErr = err
			return false, nil
		}
		last, lastErr = pr, nil
		return pr.Done, nil
	})
	if wait.Interrupted(err) {
		if lastErr != nil && last.Text == "" {
			return last, fmt.Errorf("timed out after %s: %w", timeout, lastErr)
		}
		return last, fmt.Errorf("timed out after %s: %s", timeout, last.Text)
	}
	return last, err
}

// messages is where an action's messages go: stdout, unless stdout carries
// the object (-o json|yaml).
func (o *options) messages(f followFlags) io.Writer {
	if f.output != OutputText {
		return o.ErrOut
	}
	return o.Out
}

func (o *options) outcome(f followFlags, pr Progress, obj client.Object) error {
	fmt.Fprintln(o.messages(f), pr.Text)
	if err := o.printObject(f, obj); err != nil {
		return err
	}
	if pr.Failed {
		return ExitError{Code: 1}
	}
	return nil
}

func (o *options) printObject(f followFlags, obj client.Object) error {
	var pr printers.ResourcePrinter
	switch f.output {
	case OutputJSON:
		pr = &printers.JSONPrinter{}
	case OutputYAML:
		pr = &printers.YAMLPrinter{}
	default:
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, scheme.New())
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return pr.PrintObj(obj.(runtime.Object), o.Out)
}

// annotationList says what req writes: "a=\"1\" b=\"2\" written", and
// "c removed".
func annotationList(req Request) string {
	var parts []string
	for _, k := range []string{v1alpha1.AnnotationCapture, v1alpha1.AnnotationCancel, v1alpha1.AnnotationRequery, v1alpha1.AnnotationResolve, v1alpha1.AnnotationResolveReason, v1alpha1.AnnotationBackfillFrom} {
		if v, ok := req.Set[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%q", k, v))
		}
	}
	s := strings.Join(parts, " ") + " written"
	if len(req.Unset) > 0 {
		s += ", " + strings.Join(req.Unset, " ") + " removed"
	}
	return s
}

func needsReview(p *v1alpha1.Payment) bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
}

// completePayments completes a payment name in the namespace of the flags,
// among those keep accepts (all when nil).
func (o *options) completePayments(keep func(*v1alpha1.Payment) bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := o.session()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		items, err := s.payments(cmd.Context(), listFlags{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return withPrefix(items, toComplete, keep), cobra.ShellCompDirectiveNoFileComp
	}
}

// withPrefix returns the names of the objects that start with prefix and that
// keep accepts (nil accepts all), in order.
func withPrefix[T any, P interface {
	*T
	GetName() string
}](items []T, prefix string, keep func(P) bool) []string {
	var names []string
	for i := range items {
		if o := P(&items[i]); strings.HasPrefix(o.GetName(), prefix) && (keep == nil || keep(o)) {
			names = append(names, o.GetName())
		}
	}
	return names
}

// completeTargets completes what resolve and requery take: payment names
// (those keepPayment accepts), or refund/NAME once the type is typed (those
// keepRefund accepts).
func (o *options) completeTargets(keepPayment func(*v1alpha1.Payment) bool, keepRefund func(*v1alpha1.Refund) bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	payments := o.completePayments(keepPayment)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		typ, prefix, typed := strings.Cut(toComplete, "/")
		switch {
		case len(args) > 0:
			return nil, cobra.ShellCompDirectiveNoFileComp
		case !typed:
			return payments(cmd, args, toComplete)
		case paymentTypes[strings.ToLower(typ)]:
			names, d := payments(cmd, args, prefix)
			for i := range names {
				names[i] = typ + "/" + names[i]
			}
			return names, d
		case !refundTypes[strings.ToLower(typ)]:
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := o.session()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var list v1alpha1.RefundList
		if err := s.c.List(cmd.Context(), &list, client.InNamespace(s.ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := withPrefix(list.Items, prefix, keepRefund)
		for i := range names {
			names[i] = typ + "/" + names[i]
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeProviders completes PaymentProvider names of the namespace.
func (o *options) completeProviders(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := o.session()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var list v1alpha1.PaymentProviderList
	if err := s.c.List(cmd.Context(), &list, client.InNamespace(s.ns)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return withPrefix[v1alpha1.PaymentProvider](list.Items, toComplete, nil), cobra.ShellCompDirectiveNoFileComp
}

func (o *options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var list corev1.NamespaceList
	if err := c.List(cmd.Context(), &list); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return withPrefix[corev1.Namespace](list.Items, toComplete, nil), cobra.ShellCompDirectiveNoFileComp
}
