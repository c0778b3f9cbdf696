package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeAgentCommand makes the test binary an agent that starts one guarded instruction
// and waits, to be SIGKILLed by the test.
const fakeAgentCommand = "fake-agent-running"

func fakeAgent(argv []string) int {
	cmd := guardedCommand(guardExecutable, argv)
	if err := cmd.Start(); err != nil {
		return 1
	}
	_ = cmd.Wait()
	time.Sleep(time.Hour)
	return 0
}

func TestTheGuardKillsTheWholeInstructionWhenTheAgentIsKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	// As `/bin/sh -c "kubeadm join … && …"` runs: the shell waits for a child of its own.
	agentProc := exec.Command(guardExecutable, fakeAgentCommand, "/bin/sh", "-c", `sleep 300 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait`, pidFile)
	if err := agentProc.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = agentProc.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = agentProc.Process.Kill(); <-reaped })

	var grandchild int
	waitUntil(t, "the instruction's child started", 10*time.Second, func() bool {
		raw, err := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil && grandchild > 0
	})
	_, pgrp, _ := procStat(grandchild)
	if pgrp == 0 || pgrp == agentProc.Process.Pid {
		t.Fatalf("the instruction's child is in group %d, want the guard's own (not the agent's %d)", pgrp, agentProc.Process.Pid)
	}
	if err := agentProc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-reaped
	// Nothing restarts the agent here: the guard alone must end the instruction's group.
	waitUntil(t, "the instruction's child gone after the agent's SIGKILL", 5*time.Second, func() bool { return !alive(grandchild) && groupMembers(pgrp) == 0 })
}

func TestTheGuardExitsAsTheCommandDid(t *testing.T) {
	for _, c := range []struct {
		script string
		code   int
	}{
		{"exit 0", 0},
		{"echo out; echo err >&2; exit 3", 3},
		{"kill -9 $$", -1}, // killed: reported as the agent reports a killed instruction
	} {
		cmd := guardedCommand(guardExecutable, []string{"/bin/sh", "-c", c.script})
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%q: %v", c.script, err)
		}
		if got := cmd.ProcessState.ExitCode(); got != c.code {
			t.Errorf("%q: exit code %d, want %d (output %q)", c.script, got, c.code, out)
		}
		if c.code == 3 && string(out) != "out\nerr\n" {
			t.Errorf("output %q", out)
		}
	}
	// A guard whose agent is not its parent (the agent died before it could watch) runs nothing.
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(guardExecutable, GuardCommand, "--parent", "1", "--", "/bin/sh", "-c", "touch "+marker)
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 137 {
		t.Errorf("guard with a dead parent: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the guard ran the command although its agent was gone")
	}
}
