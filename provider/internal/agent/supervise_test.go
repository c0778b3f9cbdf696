package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be the supervisor start detaches (`<test binary> supervise
// run --name N --dir D`) and the instruction guard (`<test binary> instruction-guard …`),
// as provisioner-agent is in production, and an agent that only starts a guarded
// instruction (guard_test.go).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == GuardCommand {
		os.Exit(RunGuard(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == fakeAgentCommand {
		os.Exit(fakeAgent(os.Args[2:]))
	}
	if len(os.Args) >= 7 && os.Args[1] == "supervise" && os.Args[2] == "run" {
		if err := SuperviseRun(context.Background(), Supervised{Name: os.Args[4], Dir: os.Args[6]}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func lines(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(raw))
}

func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

func TestSupervise(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(dir, "starts")
	child := filepath.Join(dir, "child")
	// The command records each start, and starts a child of its own that stop must kill too
	// (the process group, as the kubelet's helpers would be).
	script := fmt.Sprintf(`echo $$ >> %s; sleep 300 & echo $! > %s; wait`, starts, child)
	o := SuperviseOptions{Supervised: Supervised{Name: "sleeper", Dir: filepath.Join(dir, "supervise")}, Command: []string{"/bin/sh", "-c", script},
		RestartDelay: 100 * time.Millisecond, StopTimeout: 2 * time.Second, Self: self}
	var out strings.Builder
	o.Out = &out
	if err := SuperviseStart(o); err != nil {
		t.Fatal(err)
	}
	pid, ok := o.Running()
	if !ok {
		t.Fatalf("not running after start; said %q", out.String())
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	// Detached: its own session, not this test's process group.
	if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0); int(sid) != pid {
		t.Errorf("supervisor session %d, want its own (%d)", sid, pid)
	}
	waitUntil(t, "the first start", 10*time.Second, func() bool { return len(lines(t, starts)) == 1 })

	// The command dies: the supervisor runs it again.
	first, _ := strconv.Atoi(lines(t, starts)[0])
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a restart", 10*time.Second, func() bool { return len(lines(t, starts)) == 2 })

	// Start again with the same command: nothing changes.
	out.Reset()
	if err := SuperviseStart(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := o.Running(); again != pid || !strings.Contains(out.String(), "already supervised") {
		t.Errorf("second start: pid %d (was %d), said %q", again, pid, out.String())
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(lines(t, starts)); n != 2 {
		t.Errorf("%d starts after a second start of the same command, want 2", n)
	}

	// Stop: the supervisor, the command and the command's child are gone, the pid file too.
	second, _ := strconv.Atoi(lines(t, starts)[1])
	grandchild, _ := strconv.Atoi(lines(t, child)[0])
	out.Reset()
	o.StopTimeout = 0 // as the CLI passes it: the one start recorded
	if err := SuperviseStop(o); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]int{"supervisor": pid, "command": second, "command's child": grandchild} {
		if alive(p) {
			t.Errorf("%s (pid %d) still runs after stop", name, p)
		}
	}
	if _, err := os.Stat(o.PidFile()); !os.IsNotExist(err) {
		t.Errorf("pid file left after stop: %v", err)
	}
	log, _ := os.ReadFile(o.LogFile())
	for _, want := range []string{"started /bin/sh", "exited: signal: killed", "restarting in", "stopped"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// Stopping what does not run succeeds (a reset plan run twice).
	out.Reset()
	if err := SuperviseStop(o); err != nil || !strings.Contains(out.String(), "not running") {
		t.Errorf("second stop: %v, said %q", err, out.String())
	}
}

func TestSuperviseRestartsWithAnotherCommand(t *testing.T) {
	dir := t.TempDir()
	self, _ := os.Executable()
	marker := filepath.Join(dir, "which")
	o := SuperviseOptions{Supervised: Supervised{Name: "k", Dir: dir}, Self: self, StopTimeout: time.Second,
		Command: []string{"/bin/sh", "-c", "echo one >> " + marker + "; exec sleep 300"}}
	if err := SuperviseStart(o); err != nil {
		t.Fatal(err)
	}
	first, _ := o.Running()
	t.Cleanup(func() { _ = SuperviseStop(o) })
	waitUntil(t, "the first command", 10*time.Second, func() bool { return len(lines(t, marker)) == 1 })
	o.Command = []string{"/bin/sh", "-c", "echo two >> " + marker + "; exec sleep 300"}
	if err := SuperviseStart(o); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second command", 10*time.Second, func() bool { return len(lines(t, marker)) == 2 })
	if second, _ := o.Running(); second == first || alive(first) {
		t.Errorf("the supervisor of the first command (%d) still runs, now %d", first, second)
	}
	if got := strings.Join(lines(t, marker), " "); got != "one two" {
		t.Errorf("commands run: %q", got)
	}
}

func TestSuperviseRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "Kubelet", "../x", "a b"} {
		if err := SuperviseStart(SuperviseOptions{Supervised: Supervised{Name: name, Dir: t.TempDir()}, Command: []string{"/bin/true"}}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}
