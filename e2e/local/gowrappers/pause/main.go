// Command pause is the sandbox ("pause") container of the real node's pods: it holds the pod's
// namespaces open, reaps the zombies it inherits as the pod's pid 1, and exits on SIGTERM/SIGINT.
// Built static with no dependencies so the image is a single file (e2e/local/build.sh).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for { // reap every exited child; Wait4 with WNOHANG returns 0 when none is left
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
