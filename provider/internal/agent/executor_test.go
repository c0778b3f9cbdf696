package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

func TestOnServer(t *testing.T) {
	for _, c := range []struct {
		url, server string
		want        bool
	}{
		{"https://198.19.0.10:6443/api/v1/namespaces/provisioner-agent-system/services/node-artifacts/proxy/node/bin/kubelet", "https://198.19.0.10:6443", true},
		{"https://198.19.0.10:6443/api/v1/x", "https://198.19.0.10:6443/", true},
		{"https://198.19.0.10:6443/prefix/api", "https://198.19.0.10:6443/prefix", true},
		{"https://198.19.0.10:6443/prefixed/api", "https://198.19.0.10:6443/prefix", false},
		{"http://198.19.0.10:6443/api", "https://198.19.0.10:6443", false},
		{"https://198.19.0.10:6480/node/bin/kubelet", "https://198.19.0.10:6443", false},
		{"https://198.19.0.11:6443/api", "https://198.19.0.10:6443", false},
		{"https://user@198.19.0.10:6443/api", "https://198.19.0.10:6443", false},
		{"https://198.19.0.10:6443.example/api", "https://198.19.0.10:6443", false},
		{"https://198.19.0.10:6443/api", "", false},
	} {
		if got := onServer(c.url, c.server); got != c.want {
			t.Errorf("onServer(%q, %q) = %v, want %v", c.url, c.server, got, c.want)
		}
	}
}

// The agent's token goes to its API server's URLs and to no other.
func TestContentRefURLCredentialsOnlyForTheAPIServer(t *testing.T) {
	var seen []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Host+" "+r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "content")
	})
	api := httptest.NewTLSServer(handler)
	defer api.Close()
	other := httptest.NewServer(handler)
	defer other.Close()

	cfg := &rest.Config{Host: api.URL, BearerToken: "agent-token", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	apiHTTP, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{APIServer: &APIServerClient{Server: api.URL, Client: apiHTTP}}
	for _, u := range []string{api.URL + "/api/v1/namespaces/provisioner-agent-system/services/node-artifacts/proxy/node/bin/kubeadm", other.URL + "/node/bin/kubeadm"} {
		body, _, err := e.fileSource(context.Background(), "host-a", &agentv1.PlanFile{Path: "/usr/local/bin/kubeadm", ContentRef: &agentv1.ContentRef{URL: u}})
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_ = body.Close()
	}
	if len(seen) != 2 || seen[0] != api.Listener.Addr().String()+" Bearer agent-token" || seen[1] != other.Listener.Addr().String()+" " {
		t.Fatalf("requests seen (host, Authorization): %q; want the token on the API server's URL only", seen)
	}
}
