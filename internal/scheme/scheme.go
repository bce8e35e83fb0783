// Package scheme builds the runtime.Scheme every paywarden process uses: the
// core Kubernetes kinds plus paywarden's.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// New returns a scheme with the core Kubernetes kinds and paywarden's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	// Registration of static type lists cannot fail at run time; a failure
	// here is a programming error caught by every test.
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
