//go:build !linux

package stripe

import "os/exec"

// dieWithParent: only Linux can tie the child's life to the parent's; elsewhere
// TestMain's cleanup stops stripe-mock.
func dieWithParent(*exec.Cmd) {}
