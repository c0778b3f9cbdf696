// Command pause is the sandbox (infra) container of every pod on a hosts-platform node:
// it holds the pod's namespaces open and does nothing else. It is ours, built statically
// from this module, so nodes need no registry for it (image provisioner.local/pause).
//
// It waits for SIGINT or SIGTERM and exits 0. Run as PID 1 of a pod's PID namespace
// (shareProcessNamespace), it also reaps the orphans re-parented to it, as the upstream
// pause does.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"provisioner.dev/provider/internal/version"
)

func main() {
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	// Upstream pause takes -v for its version; accept it too, so tools that probe it work.
	flag.BoolVar(showVersion, "v", false, "Print the version and exit (same as --version).")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	os.Exit(wait())
}

// wait blocks until SIGINT or SIGTERM (exit code 0) and reaps children on SIGCHLD.
func wait() int {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		return 0
	}
	return 0
}

// reap collects every exited child without blocking, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
