package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/version"
)

// A hand-over moves an agent from the manager it registered with (the source) to
// another (the target) when its Host moved there (a pivot). The source publishes
// Secret agentv1.HandoverSecret in the host's plan namespace: the target's URL, its CA
// checksum and a one-use token of the target confined to this host. The agent, between
// two plans, registers with the target as the same host, keeps the granted credential
// as pending (handover.json), stops watching the source, promotes the pending
// credential to its own and starts again against the target. The source then revokes
// the old credential.

// ErrFollowed ends a Run whose agent has a pending credential for another server: the
// caller promotes it (CompleteHandover) and runs again.
var ErrFollowed = errors.New("following the host to another manager")

// handoverFile holds a credential granted by the target but not yet in use.
const handoverFile = "handover.json"

type pendingHandover struct {
	Credential Credential `json:"credential"`
	Token      string     `json:"token"`
}

// HandoverOptions are the inputs of PrepareHandover.
type HandoverOptions struct {
	DataDir DataDir
	// LockPath is the node's plan lock file: no hand-over while a plan of this agent runs.
	LockPath string
	// LockStaleAfter as in RunOptions.
	LockStaleAfter time.Duration
	// Timeout for the registration with the target. Default: 2m.
	Timeout time.Duration
	// Out receives progress lines (never a token).
	Out io.Writer
}

// PendingHandover reports whether a credential for another server waits to be promoted.
func (d DataDir) PendingHandover() (bool, error) {
	var p pendingHandover
	return readJSON(d.path(handoverFile), &p)
}

// CompleteHandover makes a pending credential the agent's own (token, then
// credential.json, as SaveCredential does), then forgets it. Calling it again after a
// crash half way redoes the same writes. It returns the new credential, or nil when
// none was pending.
func (d DataDir) CompleteHandover() (*Credential, error) {
	var p pendingHandover
	found, err := readJSON(d.path(handoverFile), &p)
	if err != nil || !found {
		return nil, err
	}
	if err := d.SaveCredential(&p.Credential, []byte(p.Token)); err != nil {
		return nil, fmt.Errorf("switch to the credential of %s: %w", p.Credential.Server, err)
	}
	if err := os.Remove(d.path(handoverFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &p.Credential, nil
}

// PrepareHandover looks for a hand-over published to this host by the server it talks
// to. When there is one and no plan of this agent runs, it registers with the target
// and keeps the granted credential as pending: true means the caller should stop the
// running agent, CompleteHandover, and run again. A refused current credential is not
// its business (the heartbeat reports it): it returns false, nil then.
func PrepareHandover(ctx context.Context, o HandoverOptions) (bool, error) {
	if pending, err := o.DataDir.PendingHandover(); err != nil || pending {
		return pending, err
	}
	cred, err := o.DataDir.LoadCredential()
	if err != nil || cred == nil {
		return false, err
	}
	cfg := &rest.Config{
		Host:            cred.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: cred.CAData},
		BearerTokenFile: o.DataDir.TokenPath(),
		UserAgent:       "provisioner-agent/" + version.Version,
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return false, err
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: cred.Namespace, Name: agentv1.HandoverSecret}, &secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return false, nil
		}
		return false, fmt.Errorf("look for a hand-over: %w", err)
	}
	b := Bootstrap{
		Server:                strings.TrimSpace(string(secret.Data["server"])),
		CAChecksum:            strings.TrimSpace(string(secret.Data["caChecksum"])),
		Token:                 strings.TrimSpace(string(secret.Data["token"])),
		RegistrationNamespace: strings.TrimSpace(string(secret.Data["registrationNamespace"])),
		HostName:              cred.Host,
	}
	if b.RegistrationNamespace == "" {
		b.RegistrationNamespace = agentv1.DefaultRegistrationNamespace
	}
	if b.Server == "" || b.CAChecksum == "" || b.Token == "" {
		return false, fmt.Errorf("hand-over Secret %s/%s lacks server, caChecksum or token", cred.Namespace, agentv1.HandoverSecret)
	}
	if b.Server == cred.Server {
		return false, nil // published for the server we already talk to: nothing to follow
	}
	if busy, err := planRunning(o); err != nil || busy {
		return false, err
	}

	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fmt.Fprintf(o.Out, "host %s moved to %s: registering there\n", cred.Host, b.Server)
	next, token, done, err := exchangeToken(ctx, b, timeout, o.Out)
	if err != nil {
		return false, fmt.Errorf("follow host %s to %s: %w", cred.Host, b.Server, err)
	}
	raw, err := json.Marshal(pendingHandover{Credential: *next, Token: string(token)})
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(o.DataDir.path(handoverFile), raw); err != nil {
		return false, fmt.Errorf("save the credential of %s: %w", b.Server, err)
	}
	done(ctx)
	fmt.Fprintf(o.Out, "granted a credential by %s for host %s; switching over\n", b.Server, next.Host)
	return true, nil
}

// planRunning: a live process of this host holds the plan lock.
func planRunning(o HandoverOptions) (bool, error) {
	if o.LockPath == "" {
		return false, nil
	}
	lock := &Lock{Path: o.LockPath, StaleAfter: o.LockStaleAfter}
	info, err := lock.Read()
	if err != nil || info == nil {
		return false, err
	}
	return !lock.Stale(info), nil
}
