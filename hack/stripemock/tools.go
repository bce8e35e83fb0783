//go:build tools

// Package stripemock pins the stripe-mock program built by hack/stripemock/build.sh.
package stripemock

import (
	_ "github.com/stripe/stripe-mock"
)
