package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as pause: with PAUSE_TEST_CHILD set it runs main.
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_CHILD") == "1" {
		os.Args = []string{"pause"}
		main()
		return
	}
	os.Exit(m.Run())
}

func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "PAUSE_TEST_CHILD=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Still running after a while: it waits rather than exits.
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v: pause exited with %v, want 0", sig, err)
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: pause did not exit", sig)
		}
	}
}

func TestReapsExitedChildren(t *testing.T) {
	// A child of this process that exits becomes a zombie until reaped; reap collects it.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for {
		reap()
		// Once reaped, the pid is gone: signal 0 fails with ESRCH.
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d was not reaped", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
