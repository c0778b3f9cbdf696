package agent

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// Exit codes of the agent binary, besides 0 and 1 (any other failure).
const (
	// ExitUsage: bad flags, or `run` before `register`.
	ExitUsage = 2
	// ExitCredentialRefused: the server refused the token or the credential (expired,
	// used, revoked, Host deleted). Retrying does not help; a new token does.
	ExitCredentialRefused = 3
)

// ExitError carries the exit code the binary should end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func refused(format string, args ...any) error {
	return &ExitError{Code: ExitCredentialRefused, Err: fmt.Errorf(format, args...)}
}

// RegisterOptions are the register command's inputs.
type RegisterOptions struct {
	DataDir DataDir
	// Bootstrap: server, CA checksum, import token and what to register as. Ignored when
	// the host is registered already; taken from the data directory when a registration
	// was interrupted and Token is empty.
	Bootstrap Bootstrap
	// TokenFile, when the token came from a file, is deleted with the bootstrap state.
	TokenFile string
	// Timeout for the whole registration, grant included. Default: 2m.
	Timeout time.Duration
	// Out receives progress lines.
	Out io.Writer
}

// Scheme knows the core kinds and ours.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = agentv1.AddToScheme(s)
	return s
}

// Register turns an import token into this host's own credential, once. On a host that
// is registered already it changes nothing and says so.
func Register(ctx context.Context, o RegisterOptions) (*Credential, error) {
	if existing, err := o.DataDir.LoadCredential(); err != nil {
		return nil, err
	} else if existing != nil {
		// A crash after the credential was written but before cleanup leaves the
		// bootstrap behind: finish the cleanup, never re-register.
		if err := removeBootstrap(o); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Out, "already registered as host %s (credential in %s); not registering again\n", existing.Host, o.DataDir)
		return existing, nil
	}

	b := o.Bootstrap
	if b.Token == "" {
		saved, err := o.DataDir.LoadBootstrap()
		if err != nil {
			return nil, err
		}
		if saved == nil {
			return nil, &ExitError{Code: ExitUsage, Err: errors.New("no registration token: pass --token or --token-file (from `provisioner hosts registration-command`)")}
		}
		b = *saved
		fmt.Fprintf(o.Out, "resuming the registration of host %s\n", b.HostName)
	}
	if err := o.DataDir.SaveBootstrap(&b); err != nil {
		return nil, fmt.Errorf("save bootstrap state: %w", err)
	}

	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cred, token, done, err := exchangeToken(ctx, b, timeout, o.Out)
	if err != nil {
		return nil, err
	}
	if err := o.DataDir.SaveCredential(cred, token); err != nil {
		return nil, fmt.Errorf("save the credential: %w", err)
	}
	done(ctx)
	if err := removeBootstrap(o); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "registered as host %s; plans come from namespace %s\n", cred.Host, cred.Namespace)
	return cred, nil
}

// exchangeToken registers with b's server as b.HostName: it pins the server's CA, creates
// the HostRegistration its import token allows, waits for the grant and reads the
// granted credential. done deletes the registration, which tells the manager to delete
// the import credential and its copy of ours: call it once the credential is saved.
func exchangeToken(ctx context.Context, b Bootstrap, timeout time.Duration, out io.Writer) (cred *Credential, token []byte, done func(context.Context), err error) {
	caPEM, err := FetchPinnedCA(ctx, b.Server, b.RegistrationNamespace, b.CAChecksum)
	if err != nil {
		return nil, nil, nil, err
	}
	importCfg := &rest.Config{Host: b.Server, BearerToken: b.Token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, UserAgent: "provisioner-agent"}
	c, err := client.New(importCfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, nil, nil, err
	}

	// The registration is named after the import ServiceAccount (the webhook insists),
	// which the server tells us: the token is opaque to the agent.
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		if apierrors.IsUnauthorized(err) {
			return nil, nil, nil, refused("the registration token was refused by %s: it expired, was already used, or was revoked; ask for a new registration command", b.Server)
		}
		return nil, nil, nil, fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	namespace, name, ok := serviceAccountOf(review.Status.UserInfo.Username)
	if !ok {
		return nil, nil, nil, refused("the token is not a registration token (it belongs to %q)", review.Status.UserInfo.Username)
	}

	reg := &agentv1.HostRegistration{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       agentv1.HostRegistrationSpec{HostName: b.HostName, Address: b.Address, Roles: b.Roles, Labels: b.Labels},
	}
	if err := c.Create(ctx, reg); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, nil, nil, refused("registration refused: %v", err)
		}
		return nil, nil, nil, fmt.Errorf("create HostRegistration %s/%s: %w", namespace, name, err)
	}
	fmt.Fprintf(out, "registration %s/%s sent for host %s; waiting for the grant\n", namespace, name, b.HostName)

	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(reg), reg); err != nil {
			if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
				return nil, nil, nil, refused("registration %s/%s is no longer readable (%v): the token expired or was revoked", namespace, name, err)
			}
			return nil, nil, nil, err
		}
		if reg.Status.Phase == agentv1.RegistrationDenied {
			return nil, nil, nil, refused("registration denied: %s", reg.Status.Message)
		}
		if reg.Status.Phase == agentv1.RegistrationGranted {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil, fmt.Errorf("no grant for registration %s/%s within %s: is the agent manager running?", namespace, name, timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}

	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: reg.Status.CredentialSecretName}, &secret); err != nil {
		return nil, nil, nil, fmt.Errorf("read the granted credential: %w", err)
	}
	cred = &Credential{
		Server:         b.Server,
		CAData:         caPEM,
		Host:           string(secret.Data["host"]),
		Namespace:      string(secret.Data["namespace"]),
		ServiceAccount: string(secret.Data["serviceAccount"]),
	}
	done = func(ctx context.Context) {
		if err := c.Delete(ctx, reg); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "warning: could not delete registration %s/%s (%v); the manager removes it when the token expires\n", namespace, name, err)
		}
	}
	return cred, secret.Data["token"], done, nil
}

func removeBootstrap(o RegisterOptions) error {
	if err := o.DataDir.RemoveBootstrap(); err != nil {
		return fmt.Errorf("delete the bootstrap token: %w", err)
	}
	if o.TokenFile != "" {
		if err := os.Remove(o.TokenFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete the bootstrap token file %s: %w", o.TokenFile, err)
		}
	}
	return nil
}

func serviceAccountOf(username string) (namespace, name string, ok bool) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", "", false
	}
	return parts[2], parts[3], true
}

// CAChecksum is the pin of a CA certificate: the sha256 of its DER encoding, in hex
// (`openssl x509 -in ca.crt -outform DER | sha256sum`).
func CAChecksum(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// FetchPinnedCA reads the server's published CA without verifying the server (there is
// nothing to verify it with yet, and no credential is sent), and accepts it only when a
// certificate in it has the pinned checksum. It returns that certificate, in PEM, as
// the only trust root from now on.
func FetchPinnedCA(ctx context.Context, server, namespace, checksum string) ([]byte, error) {
	want := strings.ToLower(strings.TrimPrefix(checksum, "sha256:"))
	if len(want) != 64 {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--ca-checksum %q is not a sha256 (64 hex digits)", checksum)}
	}
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--server %q is not an https URL", server)}
	}
	transport := &http.Transport{
		// Unverified on purpose: the checksum below is the verification.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec
		DialContext:     (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	}
	defer transport.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimSuffix(server, "/")+"/api/v1/namespaces/"+namespace+"/configmaps/"+agentv1.ServerCAConfigMap, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the server's CA from %s: %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the server's CA from %s: HTTP %d (is the agent manager running, and anonymous requests allowed?)", server, resp.StatusCode)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(body, &cm); err != nil {
		return nil, fmt.Errorf("the server's CA ConfigMap: %w", err)
	}
	rest := []byte(cm.Data["ca.crt"])
	var seen []string
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil || block.Type != "CERTIFICATE" {
			continue
		}
		got := CAChecksum(cert)
		if got == want {
			return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), nil
		}
		seen = append(seen, got)
	}
	return nil, refused("the server %s presents a CA with checksum %s, not the pinned %s: not trusting it", server, strings.Join(seen, ", "), want)
}
