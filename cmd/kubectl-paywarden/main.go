// Command kubectl-paywarden is the kubectl plugin `kubectl paywarden`, the
// operator's console for paywarden payments (internal/plugin). On the PATH
// as kubectl-paywarden, kubectl runs it as `kubectl paywarden`; linked as
// kubectl_complete-paywarden, kubectl's shell completion asks it for
// payment names.
package main

import (
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paywarden/paywarden/internal/plugin"
)

func main() {
	// controller-runtime's client logs nothing a user needs; without a
	// logger it would warn that none was set.
	log.SetLogger(logr.Discard())
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "kubectl_complete-paywarden" {
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	os.Exit(plugin.Run(args, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
