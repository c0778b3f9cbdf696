package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the forwarder: with FORWARDER_TEST_ARGS set (a JSON list) it runs main with them.
func TestMain(m *testing.M) {
	if raw := os.Getenv("FORWARDER_TEST_ARGS"); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			panic(err)
		}
		os.Args = append([]string{"provisioner-forwarder"}, args...)
		main()
		return
	}
	os.Exit(m.Run())
}

func forwarder(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "FORWARDER_TEST_ARGS="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

func TestFilesOnlyRefusesAWildcardOrAName(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "localhost:0"} {
		cmd, stderr := forwarder(t, "--artifacts-listen", listen, "--artifacts-dir", t.TempDir())
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "not a name or a wildcard") {
			t.Errorf("--artifacts-listen %s: %v, stderr %q; want exit 1 naming the wildcard", listen, err, stderr)
		}
	}
}

// With --artifacts-listen and --artifacts-dir alone it serves the files (and nothing else) until SIGTERM.
func TestFilesOnlyServesTheDirectoryUntilSIGTERM(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node", "bin", "kubelet"), []byte("kubelet bytes"), 0o755); err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	cmd, stderr := forwarder(t, "--artifacts-listen", addr, "--artifacts-dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()

	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := get("/node/bin/kubelet")
		if err == nil {
			if code != http.StatusOK || body != "kubelet bytes" {
				t.Fatalf("GET /node/bin/kubelet: %d %q", code, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on %s: %v\n%s", addr, err, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, _ := get("/node/bin/"); code != http.StatusNotFound {
		t.Errorf("a directory listing: HTTP %d, want 404", code)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "(files only)") {
		t.Errorf("stderr does not say it serves files only:\n%s", stderr)
	}
}
