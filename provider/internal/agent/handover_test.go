package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A pending hand-over becomes the agent's credential at the next start, also when a crash
// left it half promoted (token written, credential.json still the old server's).
func TestCompleteHandoverPromotesThePendingCredentialOnce(t *testing.T) {
	dir := DataDir(t.TempDir())
	old := &Credential{Server: "https://old:6443", Host: "h0", Namespace: "host-h0", ServiceAccount: "agent"}
	if err := dir.SaveCredential(old, []byte("old-token")); err != nil {
		t.Fatal(err)
	}
	if got, err := dir.CompleteHandover(); err != nil || got != nil {
		t.Fatalf("nothing pending: got %+v, %v", got, err)
	}

	next := Credential{Server: "https://new:6443", Host: "h0", Namespace: "host-h0", ServiceAccount: "agent"}
	raw, _ := json.Marshal(pendingHandover{Credential: next, Token: "new-token"})
	if err := writeFileAtomic(dir.path(handoverFile), raw); err != nil {
		t.Fatal(err)
	}
	// As if the previous start died after writing the token only.
	if err := writeFileAtomic(dir.TokenPath(), []byte("new-token")); err != nil {
		t.Fatal(err)
	}
	if pending, err := dir.PendingHandover(); err != nil || !pending {
		t.Fatalf("pending: %v, %v", pending, err)
	}

	got, err := dir.CompleteHandover()
	if err != nil || got == nil || got.Server != next.Server {
		t.Fatalf("CompleteHandover: %+v, %v", got, err)
	}
	cred, err := dir.LoadCredential()
	if err != nil || cred.Server != next.Server {
		t.Fatalf("stored credential: %+v, %v", cred, err)
	}
	if token, _ := os.ReadFile(dir.TokenPath()); string(token) != "new-token" {
		t.Fatalf("token %q", token)
	}
	if _, err := os.Stat(filepath.Join(string(dir), handoverFile)); !os.IsNotExist(err) {
		t.Fatalf("handover.json left: %v", err)
	}
	for _, name := range []string{credentialFile, tokenFile} {
		info, err := os.Stat(filepath.Join(string(dir), name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %o, want 0600", name, info.Mode().Perm())
		}
	}
	if again, err := dir.CompleteHandover(); err != nil || again != nil {
		t.Fatalf("a second call promoted again: %+v, %v", again, err)
	}
}
