// Package agent is the node agent: registration (import token -> own credential),
// and the plan runner (watch this host's NodePlans, execute them one at a time under
// a lock file).
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files in the agent's data directory, every one 0600.
const (
	credentialFile = "credential.json" // present = registered; the agent never registers again
	tokenFile      = "token"           // the agent's bearer token, renewed in place
	bootstrapFile  = "bootstrap.json"  // the import token and what to register as, until registered
)

// Credential is what registration leaves on disk: where the server is, its CA, and
// who this host is. The token itself is in its own file, so a renewal rewrites only it
// and the API client rereads it.
type Credential struct {
	Server         string `json:"server"`
	CAData         []byte `json:"caData"`
	Host           string `json:"host"`
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
}

// Bootstrap is the registration in progress: written before the first request, so a
// crash resumes with the same token; deleted once the credential is on disk.
type Bootstrap struct {
	Server                string            `json:"server"`
	CAChecksum            string            `json:"caChecksum"`
	Token                 string            `json:"token"`
	RegistrationNamespace string            `json:"registrationNamespace"`
	HostName              string            `json:"hostName"`
	Address               string            `json:"address,omitempty"`
	Roles                 []string          `json:"roles,omitempty"`
	Labels                map[string]string `json:"labels,omitempty"`
}

// DataDir is the agent's state directory.
type DataDir string

func (d DataDir) path(name string) string { return filepath.Join(string(d), name) }

// TokenPath is the file holding the agent's bearer token.
func (d DataDir) TokenPath() string { return d.path(tokenFile) }

// LoadCredential returns nil, nil when the host is not registered.
func (d DataDir) LoadCredential() (*Credential, error) {
	var c Credential
	if found, err := readJSON(d.path(credentialFile), &c); err != nil || !found {
		return nil, err
	}
	if _, err := os.Stat(d.TokenPath()); err != nil {
		return nil, fmt.Errorf("%s exists but its token file %s does not: %w", d.path(credentialFile), d.TokenPath(), err)
	}
	return &c, nil
}

// SaveCredential writes the token, then the credential: the credential file's presence
// is what "registered" means, so it comes last.
func (d DataDir) SaveCredential(c *Credential, token []byte) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(d.TokenPath(), token); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(d.path(credentialFile), raw)
}

// LoadBootstrap returns nil, nil when no registration is in progress.
func (d DataDir) LoadBootstrap() (*Bootstrap, error) {
	var b Bootstrap
	if found, err := readJSON(d.path(bootstrapFile), &b); err != nil || !found {
		return nil, err
	}
	return &b, nil
}

func (d DataDir) SaveBootstrap(b *Bootstrap) error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(d.path(bootstrapFile), raw)
}

// RemoveBootstrap deletes the bootstrap file (and with it the import token).
func (d DataDir) RemoveBootstrap() error {
	if err := os.Remove(d.path(bootstrapFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func readJSON(path string, into any) (bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return false, fmt.Errorf("%s is not valid JSON (%w); remove it to start over", path, err)
	}
	return true, nil
}

// writeFileAtomic writes a 0600 file through a temp file and a rename, so a crash never
// leaves half a credential.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
