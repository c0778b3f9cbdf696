package artifacts

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// serve starts the handler on a real loopback listener over a directory with one file,
// a subdirectory, a dot file, and a secret plus a symlink to it outside the root.
func serve(t *testing.T) (string, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "artifacts")
	must(t, os.MkdirAll(filepath.Join(dir, "node", "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "node", "bin", "kubelet"), []byte("kubelet bytes"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "node", "bin", ".kubelet.partial"), []byte("partial"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o600))
	must(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "node", "escape")))
	must(t, os.Symlink("bin/kubelet", filepath.Join(dir, "node", "inside")))
	h, err := NewHandler(dir)
	must(t, err)
	t.Cleanup(func() { _ = h.Close() })
	server := httptest.NewServer(h)
	t.Cleanup(server.Close)
	return server.URL, base
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	must(t, err)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	must(t, err)
	return res.StatusCode, string(body)
}

// raw sends a request line as written (no client-side cleaning of `..`), returning the status line.
func raw(t *testing.T, base, target string) string {
	t.Helper()
	conn, err := net.Dial("tcp", base[len("http://"):])
	must(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	must(t, err)
	reply, err := io.ReadAll(conn)
	must(t, err)
	line := string(reply)
	for i := range line {
		if line[i] == '\r' {
			return line[:i]
		}
	}
	return line
}

func TestServesARegularFile(t *testing.T) {
	url, _ := serve(t)
	code, body := get(t, http.MethodGet, url+"/node/bin/kubelet")
	if code != http.StatusOK || body != "kubelet bytes" {
		t.Fatalf("GET kubelet: %d %q", code, body)
	}
	// A symlink that stays inside the directory is followed.
	if code, body := get(t, http.MethodGet, url+"/node/inside"); code != http.StatusOK || body != "kubelet bytes" {
		t.Fatalf("GET symlink inside: %d %q", code, body)
	}
}

func TestRefusesListingTraversalAndWrites(t *testing.T) {
	url, _ := serve(t)
	for _, path := range []string{"/", "/node", "/node/", "/node/bin/", "/node/bin/.kubelet.partial", "/node/escape", "/missing"} {
		if code, body := get(t, http.MethodGet, url+path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %q, want 404", path, code, body)
		}
	}
	// Traversal as sent on the wire, plain and escaped: never the secret.
	for _, target := range []string{"/../secret", "/node/../../secret", "/node/%2e%2e/%2e%2e/secret", "/node/bin/..%2f..%2f..%2fsecret", "//etc/passwd"} {
		status := raw(t, url, target)
		if status == "HTTP/1.1 200 OK" {
			t.Errorf("GET %s: %s, want a refusal", target, status)
		}
	}
	for _, method := range []string{http.MethodPut, http.MethodPost, http.MethodDelete} {
		if code, _ := get(t, method, url+"/node/bin/kubelet"); code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", method, code)
		}
	}
}
