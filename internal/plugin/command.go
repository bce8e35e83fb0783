// Package plugin is `kubectl paywarden`, the operator's console: which
// payments wait and for what (stuck), one payment's whole story (why), the
// operator's actions (capture, cancel, requery, resolve, refund) checked by
// the manager's own rules before anything is written and followed until the
// manager acted, and counts per phase (summary).
//
// It only reads the API and writes what an operator could write with
// kubectl: the annotations the manager understands and Refunds. The reports
// are pure functions of the objects read (Stuck, Why, Summarize) and the
// actions are decided by pure functions (PlanCapture, ..., PlanRefund) over
// internal/payment's rules; the commands are I/O around them.
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
whole story, and acts on payments the way the manager understands: amounts in
major units of the payment's currency, checked before anything is written.`,
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
	root.AddCommand(o.stuckCmd(), o.whyCmd(), o.summaryCmd(), o.captureCmd(), o.cancelCmd(), o.requeryCmd(), o.resolveCmd(), o.refundCmd())
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
	p := &v1alpha1.Payment{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("payment %s %w in namespace %s", name, ErrNotFound, s.ns)
		}
		return nil, fmt.Errorf("get payment %s/%s: %w", s.ns, name, err)
	}
	return p, nil
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
			if err := validOutput(output, OutputText, OutputWide, OutputJSON, OutputYAML); err != nil {
				return err
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			items, err := s.payments(cmd.Context(), l)
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
			if err := validOutput(output, OutputText, OutputWide, OutputJSON, OutputYAML); err != nil {
				return err
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			items, err := s.payments(cmd.Context(), l)
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
			return o.act(cmd.Context(), args[0], f, func(p *v1alpha1.Payment, now time.Time) (Request, error) {
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
			return o.act(cmd.Context(), args[0], f, func(p *v1alpha1.Payment, now time.Time) (Request, error) {
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
		Use:               "requery PAYMENT",
		Short:             "Query the provider now and restart the query schedule (also takes an Unknown payment back)",
		Example:           `  kubectl paywarden requery webhook-lost -n demo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(func(p *v1alpha1.Payment) bool { return !p.Status.Phase.IsFinal() }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.act(cmd.Context(), args[0], f, PlanRequery)
		},
	}
	f.add(cmd)
	return cmd
}

func (o *options) resolveCmd() *cobra.Command {
	var to, reason string
	var f followFlags
	cmd := &cobra.Command{
		Use:               "resolve PAYMENT --phase Succeeded|Failed --reason TEXT",
		Short:             "Settle a payment by hand with what the provider's dashboard shows; clears NeedsReview",
		Example:           `  kubectl paywarden resolve amount-mismatch -n demo --phase Succeeded --reason "customer paid the rest by bank transfer, OPS-123"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePayments(func(p *v1alpha1.Payment) bool { return !p.Status.Phase.IsFinal() || needsReview(p) }),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.act(cmd.Context(), args[0], f, func(p *v1alpha1.Payment, now time.Time) (Request, error) {
				return PlanResolve(p, to, reason, now)
			})
		},
	}
	cmd.Flags().StringVar(&to, "phase", "", "the phase to settle in: "+strings.Join(ResolvePhases, ", "))
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the payment's history); required")
	_ = cmd.MarkFlagRequired("phase")
	_ = cmd.MarkFlagRequired("reason")
	_ = cmd.RegisterFlagCompletionFunc("phase", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return ResolvePhases, cobra.ShellCompDirectiveNoFileComp
	})
	f.add(cmd)
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

// act decides a request on the payment as it is, writes its annotations
// only if the payment did not change meanwhile (a conflict decides again on
// the new state), and follows the manager's answer.
func (o *options) act(ctx context.Context, name string, f followFlags, plan func(*v1alpha1.Payment, time.Time) (Request, error)) error {
	if err := validOutput(f.output, OutputText, OutputJSON, OutputYAML); err != nil {
		return err
	}
	s, err := o.session()
	if err != nil {
		return err
	}
	var p *v1alpha1.Payment
	var req Request
	var written time.Time
	for attempt := 1; ; attempt++ {
		if p, err = s.payment(ctx, name); err != nil {
			return err
		}
		if req, err = plan(p, s.now); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for k, v := range req.Set {
			p.Annotations[k] = v
		}
		written = time.Now()
		err = s.c.Patch(ctx, p, patch)
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("write the %s annotation on payment %s/%s: %w", req.Verb, s.ns, name, err)
		}
		break
	}
	msg := o.messages(f)
	fmt.Fprintf(msg, "payment %s/%s: %s (annotation %s written)\n", s.ns, name, req.Describe, annotationList(req.Set))
	if req.Note != "" {
		fmt.Fprintf(msg, "note: %s\n", req.Note)
	}
	if !f.wait {
		return o.printObject(f, p)
	}
	fmt.Fprintf(o.ErrOut, "waiting up to %s for the manager...\n", f.timeout)
	// The manager's clock is not this one: its refusal Events are taken
	// from a little before the write.
	since := written.Add(-2 * time.Second)
	pr, err := follow(ctx, f.timeout, func(ctx context.Context) (Progress, error) {
		got, err := s.payment(ctx, name)
		if err != nil {
			return Progress{}, err
		}
		p = got
		pr := Check(p, req, nil)
		if pr.Done || !strings.Contains(pr.Text, "has not acted") {
			// Acted on: a refusal, if any, is an Event.
			events, err := s.events(ctx, s.ns, "Payment", name)
			if err != nil {
				return Progress{}, err
			}
			pr = Check(p, req, Refusal(req.Verb, events, since))
		}
		return pr, nil
	})
	if err != nil {
		return err
	}
	return o.outcome(f, pr, p)
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

func annotationList(set map[string]string) string {
	var parts []string
	for _, k := range []string{v1alpha1.AnnotationCapture, v1alpha1.AnnotationCancel, v1alpha1.AnnotationRequery, v1alpha1.AnnotationResolve, v1alpha1.AnnotationResolveReason} {
		if v, ok := set[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%q", k, v))
		}
	}
	return strings.Join(parts, " ")
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
		var names []string
		for i := range items {
			if strings.HasPrefix(items[i].Name, toComplete) && (keep == nil || keep(&items[i])) {
				names = append(names, items[i].Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
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
	var names []string
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, toComplete) {
			names = append(names, ns.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
