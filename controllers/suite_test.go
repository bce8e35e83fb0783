package controllers_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/fixture"
)

// env is the control plane shared by every test of the package.
var env *fixture.Env

func TestMain(m *testing.M) { fixture.Main(m, &env) }
