package stripe

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill stripe-mock when the test binary exits, even
// when a panic skips TestMain's cleanup.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
