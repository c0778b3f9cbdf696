package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/contentref"
)

// evaluateProbe runs one evaluation of a probe; nil means healthy.
func evaluateProbe(ctx context.Context, reader client.Reader, namespace string, p *agentv1.Probe) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.FileExists != nil:
		if _, err := os.Stat(p.FileExists.Path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s does not exist", p.FileExists.Path)
			}
			return err
		}
		return nil
	case p.HTTPGet != nil:
		return httpGet(ctx, reader, namespace, p.HTTPGet)
	}
	return errors.New("the probe has neither httpGet nor fileExists")
}

func httpGet(ctx context.Context, reader client.Reader, namespace string, g *agentv1.HTTPGetProbe) error {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	ref, secret := g.CAConfigMapRef, false
	if g.CASecretRef != nil {
		ref, secret = g.CASecretRef, true
	}
	if ref != nil {
		caPEM, found, err := contentref.Read(ctx, reader, namespace, ref, secret)
		if err != nil {
			return fmt.Errorf("read the probe's CA %s/%s: %w", namespace, ref.Name, err)
		}
		if !found {
			return fmt.Errorf("the probe's CA %s/%s key %q does not exist", namespace, ref.Name, ref.Key)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return fmt.Errorf("the probe's CA %s/%s key %q holds no PEM certificate", namespace, ref.Name, ref.Key)
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: HTTP %d", g.URL, resp.StatusCode)
	}
	return nil
}
