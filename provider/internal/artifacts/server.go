// Package artifacts serves the node artifacts directory (kubelet, kubeadm, image archives)
// read-only over HTTP, for hosts to fetch as NodePlan contentRef URLs. Integrity comes
// from the sha256 digest each contentRef carries, not from the transport.
package artifacts

import (
	"io/fs"
	"net/http"
	"os"
	"strings"
)

// Handler serves regular files below one directory: GET (and HEAD, which net/http
// answers from GET) only, no directory listing, no dot files, nothing outside the
// directory (os.Root refuses `..` and symlinks that leave it).
type Handler struct {
	root *os.Root
}

// NewHandler opens dir; the Handler keeps it open until Close.
func NewHandler(dir string) (*Handler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Handler{root: root}, nil
}

// Close releases the directory.
func (h *Handler) Close() error { return h.root.Close() }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := fileName(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := h.root.Open(name)
	if err != nil {
		// Missing, outside the root or unreadable: the same answer, naming nothing.
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// ServeContent answers Range requests, so an interrupted download can resume.
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// fileName turns a URL path into a slash-separated name below the root, or false for
// anything that is not a plain file path: empty, a directory (trailing slash), or any
// element that is empty, `.`, `..` or starts with a dot (temp files are dot files).
func fileName(urlPath string) (string, bool) {
	name := strings.TrimPrefix(urlPath, "/")
	if name == "" || strings.HasSuffix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return "", false
	}
	for _, element := range strings.Split(name, "/") {
		if element == "" || strings.HasPrefix(element, ".") {
			return "", false
		}
	}
	if !fs.ValidPath(name) {
		return "", false
	}
	return name, true
}
