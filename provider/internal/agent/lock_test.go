package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

func reapedPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

func TestLockIsExclusiveReentrantAndReleasedOnlyByItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.lock")
	a := &Lock{Path: path, StaleAfter: time.Minute, PID: os.Getpid()}
	b := &Lock{Path: path, StaleAfter: time.Minute, PID: os.Getppid()} // another live process

	if ok, _, _, err := a.Acquire("ns/one", 1); err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	if ok, _, _, err := a.Acquire("ns/one", 1); err != nil || !ok {
		t.Fatalf("re-entrant acquire: %v %v", ok, err)
	}
	ok, holder, _, err := b.Acquire("ns/two", 1)
	if err != nil || ok || holder.Plan != "ns/one" || holder.PID != os.Getpid() {
		t.Fatalf("second holder got %v, holder %+v, %v", ok, holder, err)
	}
	if err := b.Release("ns/one"); err != nil {
		t.Fatal(err)
	}
	if info, _ := a.Read(); info == nil {
		t.Fatal("another process released a lock it does not hold")
	}
	if err := a.Release("ns/one"); err != nil {
		t.Fatal(err)
	}
	if info, _ := a.Read(); info != nil {
		t.Fatalf("lock still held after release: %+v", info)
	}
	if ok, _, _, err := b.Acquire("ns/two", 1); err != nil || !ok {
		t.Fatalf("acquire after release: %v %v", ok, err)
	}
}

func TestStaleLocksAreTakenOver(t *testing.T) {
	now := time.Now()
	for name, holder := range map[string]LockInfo{
		"dead pid":      {Plan: "ns/old", PID: reapedPID(t), Heartbeat: now},
		"old heartbeat": {Plan: "ns/old", PID: os.Getppid(), Heartbeat: now.Add(-2 * time.Minute)},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "plan.lock")
			raw, _ := json.Marshal(holder)
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			l := &Lock{Path: path, StaleAfter: time.Minute}
			ok, _, replaced, err := l.Acquire("ns/new", 3)
			if err != nil || !ok || replaced == nil || replaced.Plan != "ns/old" {
				t.Fatalf("takeover: ok %v replaced %+v err %v", ok, replaced, err)
			}
			info, _ := l.Read()
			if info.Plan != "ns/new" || info.PID != os.Getpid() || info.Generation != 3 {
				t.Fatalf("lock after takeover: %+v", info)
			}
		})
	}
	// A fresh heartbeat from a live process is not stale.
	path := filepath.Join(t.TempDir(), "plan.lock")
	raw, _ := json.Marshal(LockInfo{Plan: "ns/live", PID: os.Getppid(), Heartbeat: now})
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, _, _, _ := (&Lock{Path: path, StaleAfter: time.Minute}).Acquire("ns/new", 1); ok {
		t.Fatal("took a live holder's lock")
	}
}

func TestRetryScheduleBacksOffUpToTheCap(t *testing.T) {
	maxAttempts, backoff := retrySchedule(&agentv1.RetryStrategy{
		MaxAttempts: 6, InitialBackoff: &metav1.Duration{Duration: time.Second}, BackoffMultiplier: "1.5", MaxBackoff: &metav1.Duration{Duration: 3 * time.Second},
	})
	if maxAttempts != 6 {
		t.Fatalf("max attempts %d", maxAttempts)
	}
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3 * time.Second, 3 * time.Second}
	for i, w := range want {
		if got := backoff(int32(i + 1)); got != w {
			t.Errorf("after attempt %d: %s, want %s", i+1, got, w)
		}
	}
	if n, _ := retrySchedule(nil); n != 1 {
		t.Errorf("default attempts %d, want 1", n)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 8}
	_, _ = b.Write([]byte("0123456789"))
	_, _ = b.Write([]byte("ab"))
	if got := b.String(); got != "456789ab" {
		t.Fatalf("tail %q", got)
	}
}

func TestTakingOverAStaleLockKillsWhatItsInstructionLeftRunning(t *testing.T) {
	// What a dead agent's instruction leaves when nothing else killed it: a shell and its child, in their own group.
	left := exec.Command("/bin/sh", "-c", "sleep 300 & wait")
	left.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = left.Wait(); close(done) }()
	t.Cleanup(func() { _ = syscall.Kill(-left.Process.Pid, syscall.SIGKILL); <-done })
	waitUntil(t, "the shell's child started", 5*time.Second, func() bool { return groupMembers(left.Process.Pid) == 2 })

	path := filepath.Join(t.TempDir(), "plan.lock")
	stale := LockInfo{Plan: "ns/join", PID: reapedPID(t), Heartbeat: time.Now(), ChildPGID: left.Process.Pid, Instruction: "cmd-5-kubeadm-join"}
	raw, _ := json.Marshal(stale)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	l := &Lock{Path: path, StaleAfter: time.Minute}
	if err := l.TakeOver(&stale); err != nil {
		t.Fatal(err)
	}
	if stale.KilledProcesses != 2 || groupMembers(left.Process.Pid) != 0 {
		t.Fatalf("killed %d, %d left in the group", stale.KilledProcesses, groupMembers(left.Process.Pid))
	}
	info, _ := l.Read()
	if info.Plan != "ns/join" || info.PID != os.Getpid() || info.ChildPGID != 0 || info.Instruction != "" {
		t.Fatalf("lock after takeover: %+v", info)
	}
	// Nothing left of it: a second look kills nothing.
	if n, err := killGroup(left.Process.Pid); n != 0 || err != nil {
		t.Fatalf("killGroup of an empty group: %d %v", n, err)
	}
}
