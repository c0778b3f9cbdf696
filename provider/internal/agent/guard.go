package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// GuardCommand is the agent's internal subcommand that runs one instruction:
// `provisioner-agent instruction-guard --parent PID -- COMMAND ARG...`.
//
// Why: the agent starts each instruction in a process group of its own, and a direct
// child can be told to die with its parent (PR_SET_PDEATHSIG), but its own children
// cannot. A shell instruction (`/bin/sh -c "kubeadm join … && …"`) would leave kubeadm
// running, orphaned, when the agent is SIGKILLed, until the next agent start killed it:
// an unsupervised join could finish, or half-finish, in between. The guard is the
// group's leader and the agent's direct child; it is told of the agent's death by a
// signal it catches (guardDeathSignal), and then kills its whole group, itself included.
const GuardCommand = "instruction-guard"

// guardDeathSignal is the parent-death signal of the guard: one nothing else sends it.
const guardDeathSignal = syscall.SIGUSR1

// guardExecutable is how the agent starts its own binary: /proc/self/exe stays valid even
// when the file was replaced (an upgrade) while the agent runs.
const guardExecutable = "/proc/self/exe"

// guardedCommand returns the command that runs argv under the guard, in a new process
// group whose id is the guard's pid. self is the agent's executable.
func guardedCommand(self string, argv []string) *exec.Cmd {
	cmd := exec.Command(self, append([]string{GuardCommand, "--parent", strconv.Itoa(os.Getpid()), "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: guardDeathSignal}
	return cmd
}

// resolveCommand finds a bare command name on the agent's PATH, as exec.Command does, so a
// missing command still fails the instruction before anything starts (exit code -1).
func resolveCommand(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	return exec.LookPath(name)
}

// RunGuard is the guard's main: it runs argv (after "--") with its own stdio, environment
// and working directory, exits as the command did, and, when its parent dies (or it is
// asked to stop), SIGKILLs its process group, the command's children included.
func RunGuard(args []string) int {
	parent := 0
	if len(args) > 1 && args[0] == "--parent" {
		parent, _ = strconv.Atoi(args[1])
		args = args[2:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || parent <= 0 {
		fmt.Fprintln(os.Stderr, "usage: provisioner-agent "+GuardCommand+" --parent PID -- COMMAND [ARG...]")
		return ExitUsage
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, guardDeathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The Go runtime ignores SIGUSR1 until Notify: a parent that died before this line
	// went unnoticed, so look at who the parent is now. Nothing starts without the agent.
	if os.Getppid() != parent {
		fmt.Fprintf(os.Stderr, "the agent (pid %d) is gone: the instruction does not start\n", parent)
		return 137
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", args[0], err)
		if errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-stop:
		// The agent is gone (or someone stops the instruction): the whole group goes,
		// this process too, so the next agent finds nothing of it running.
		_ = syscall.Kill(0, syscall.SIGKILL)
		<-waited
		return 137
	case <-waited:
	}
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && status.Signaled() {
		// Die the same way, so the agent reports the instruction as killed (exit code -1).
		signal.Reset()
		_ = syscall.Kill(os.Getpid(), status.Signal())
		return 128 + int(status.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
