// Command vcsim serves govmomi's vCenter API simulator (the one Cluster API
// Provider vSphere's maintainers test against) for provisioner's tests. govmomi's
// own vcsim command is a separate module the Go module proxy does not serve, so
// this small main wraps the same simulator packages. It listens on loopback only,
// over TLS with a certificate it writes to --cert-dir, and checks the login against
// the credentials given (any non-empty login is accepted when none are).
package main

import (
	"context"
	"crypto/sha1" //nolint:gosec // vCenter thumbprints are SHA-1 by definition
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi/simulator"

	// Endpoints beyond SOAP that a vCenter serves and CAPV calls: the REST API
	// (sessions, tags), lookup, STS and storage policies.
	_ "github.com/vmware/govmomi/lookup/simulator"
	_ "github.com/vmware/govmomi/pbm/simulator"
	_ "github.com/vmware/govmomi/sts/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

// gitVersion is set by the linker (-X main.gitVersion), as the bundle stamps every binary.
var gitVersion = "dev"

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (loopback only by default)")
	username := flag.String("username", "", "login user; empty: any non-empty login is accepted")
	password := flag.String("password", "", "login password")
	datacenters := flag.Int("datacenters", 1, "datacenters in the inventory")
	clusters := flag.Int("clusters", 1, "clusters per datacenter")
	hosts := flag.Int("cluster-hosts", 3, "hosts per cluster")
	vms := flag.Int("vms", 2, "virtual machines per host, to clone from")
	infoFile := flag.String("info-file", "", "write the URL, port and TLS thumbprint here as JSON once serving")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(gitVersion)
		return
	}
	if err := run(*listen, *username, *password, *datacenters, *clusters, *hosts, *vms, *infoFile); err != nil {
		fmt.Fprintln(os.Stderr, "vcsim:", err)
		os.Exit(1)
	}
}

func run(listen, username, password string, datacenters, clusters, hosts, vms int, infoFile string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: only loopback addresses are allowed", listen)
	}

	model := simulator.VPX()
	model.Datacenter = datacenters
	model.Cluster = clusters
	model.ClusterHost = hosts
	model.Host = 0
	model.Machine = vms
	if err := model.Create(); err != nil {
		return err
	}
	defer model.Remove()

	model.Service.Listen = &url.URL{Host: listen}
	if username != "" {
		model.Service.Listen.User = url.UserPassword(username, password)
	}
	model.Service.RegisterEndpoints = true
	// TLS as a vCenter serves it; the simulator makes a certificate for the listener.
	model.Service.TLS = new(tls.Config)
	server := model.Service.NewServer()
	defer server.Close()

	thumbprint := thumbprintOf(server.Certificate().Raw)
	served := server.URL
	served.User = nil
	fmt.Printf("vcsim %s serving %s (thumbprint %s)\n", gitVersion, served.String(), thumbprint)
	if infoFile != "" {
		info, _ := json.Marshal(map[string]string{"url": served.String(), "host": served.Host, "thumbprint": thumbprint})
		if err := os.WriteFile(infoFile, info, 0o600); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	// Close waits for every outstanding request, and a client's WaitForUpdates long poll
	// never completes on its own: drop the connections first, and since the inventory is
	// in memory with nothing to save, exit anyway if the clean-up still hangs.
	time.AfterFunc(2*time.Second, func() { os.Exit(0) })
	server.CloseClientConnections()
	return nil
}

// thumbprintOf formats a certificate's SHA-1 digest as vCenter shows it: upper-case
// hex pairs joined by colons.
func thumbprintOf(der []byte) string {
	sum := sha1.Sum(der) //nolint:gosec
	pairs := make([]string, len(sum))
	for i, b := range sum {
		pairs[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(pairs, ":")
}
