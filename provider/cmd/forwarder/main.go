// Command provisioner-forwarder makes the local control plane's API server reachable on
// one more address. kube-apiserver binds a single address (loopback, for the local
// control plane), so hosts that must reach it get this instead: a TCP forwarder that
// listens on the one address the user named and copies bytes both ways to the loopback
// API server. It does not terminate TLS: the API server's own certificate, which carries
// the named address, is what a host sees and pins.
//
// It serves /readyz (and /healthz) on a loopback health address, as the providers'
// managers do, so the local control plane supervises it like them.
//
// With --artifacts-listen and --artifacts-dir it also serves that directory read-only
// over HTTP on a second port of the same address (GET only, regular files only, no
// listing, nothing outside the directory): the node binaries and image archives hosts
// fetch as NodePlan contentRef URLs, each checked against the digest the plan carries.
//
// With --artifacts-listen and --artifacts-dir alone (no --listen, no --target) it serves
// only the files: the node-artifacts Deployment of a self-managed hosts cluster, which
// listens on its pod's address and is reached through the API server's service proxy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"provisioner.dev/provider/internal/artifacts"
	"provisioner.dev/provider/internal/version"
)

// dialTimeout bounds a connection attempt to the API server: it is on loopback, so a
// slow dial means it is not there.
const dialTimeout = 5 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner-forwarder:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		listen          = flag.String("listen", "", "Address and port to listen on, e.g. 198.18.0.1:6443: one address, never a wildcard. Required unless only files are served. Default: none.")
		target          = flag.String("target", "", "Address and port to forward to: the API server on loopback, e.g. 127.0.0.1:6443. Required with --listen. Default: none.")
		healthAddr      = flag.String("health-addr", "127.0.0.1:9440", "Address of the health endpoints (/healthz, /readyz).")
		artifactsListen = flag.String("artifacts-listen", "", "Address and port of the read-only artifacts file server, on the --listen host, e.g. 198.18.0.1:6480. Default: none (no file server).")
		artifactsDir    = flag.String("artifacts-dir", "", "Directory the artifacts file server serves. Required with --artifacts-listen.")
		showVersion     = flag.Bool("version", false, "Print the version and exit.")
	)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	if (*artifactsListen == "") != (*artifactsDir == "") {
		return errors.New("--artifacts-listen and --artifacts-dir go together")
	}
	if *listen == "" && *target == "" && *artifactsListen != "" {
		return serveFilesOnly(*artifactsListen, *artifactsDir)
	}
	if *listen == "" || *target == "" {
		return errors.New("--listen and --target are required (or --artifacts-listen and --artifacts-dir alone, to serve only files)")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *listen, err)
	}
	// Listening on every interface is exactly what this binary exists to avoid.
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("--listen %q: the host must be one IP address, not a name or a wildcard", *listen)
	}

	if *artifactsListen != "" {
		artifactsHost, _, err := net.SplitHostPort(*artifactsListen)
		if err != nil {
			return fmt.Errorf("--artifacts-listen %q: %w", *artifactsListen, err)
		}
		// The one address the user named, nothing else.
		if !net.ParseIP(artifactsHost).Equal(net.ParseIP(host)) {
			return fmt.Errorf("--artifacts-listen %q: must be on the --listen address %s", *artifactsListen, host)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	health, err := net.Listen("tcp", *healthAddr)
	if err != nil {
		listener.Close()
		return err
	}
	var files *http.Server
	if *artifactsListen != "" {
		handler, err := artifacts.NewHandler(*artifactsDir)
		if err != nil {
			listener.Close()
			health.Close()
			return fmt.Errorf("--artifacts-dir: %w", err)
		}
		defer handler.Close()
		filesListener, err := net.Listen("tcp", *artifactsListen)
		if err != nil {
			listener.Close()
			health.Close()
			return err
		}
		files = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		go func() { _ = files.Serve(filesListener) }()
		fmt.Fprintf(os.Stderr, "provisioner-forwarder %s: serving %s read-only on http://%s\n", version.Version, *artifactsDir, filesListener.Addr())
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/healthz", ok)
	healthServer := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = healthServer.Serve(health) }()

	fmt.Fprintf(os.Stderr, "provisioner-forwarder %s: forwarding %s to %s\n", version.Version, listener.Addr(), *target)
	var connections sync.WaitGroup
	go func() {
		<-ctx.Done()
		listener.Close()
		_ = healthServer.Close()
		if files != nil {
			_ = files.Close()
		}
	}()
	for {
		conn, err := listener.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var netErr net.Error
			if errors.As(err, &netErr) && netErr.Timeout() {
				continue
			}
			return err
		}
		connections.Add(1)
		go func() {
			defer connections.Done()
			forward(ctx, conn, *target)
		}()
	}
	fmt.Fprintln(os.Stderr, "provisioner-forwarder: stopping")
	connections.Wait()
	return nil
}

// serveFilesOnly serves dir read-only on listen (one IP address, never a wildcard) until
// SIGTERM or SIGINT.
func serveFilesOnly(listen, dir string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--artifacts-listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("--artifacts-listen %q: the host must be one IP address, not a name or a wildcard", listen)
	}
	handler, err := artifacts.NewHandler(dir)
	if err != nil {
		return fmt.Errorf("--artifacts-dir: %w", err)
	}
	defer handler.Close()
	listener, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	files := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		<-ctx.Done()
		_ = files.Close()
	}()
	fmt.Fprintf(os.Stderr, "provisioner-forwarder %s: serving %s read-only on http://%s (files only)\n", version.Version, dir, listener.Addr())
	if err := files.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// forward copies bytes between the client and a new connection to the target until
// either side closes (each half-close is passed on) or the forwarder stops.
func forward(ctx context.Context, client net.Conn, target string) {
	defer client.Close()
	upstream, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "tcp", target)
	if err != nil {
		fmt.Fprintf(os.Stderr, "provisioner-forwarder: %s: cannot reach %s: %v\n", client.RemoteAddr(), target, err)
		return
	}
	defer upstream.Close()
	stop := context.AfterFunc(ctx, func() {
		client.Close()
		upstream.Close()
	})
	defer stop()
	var copies sync.WaitGroup
	copies.Add(2)
	pipe := func(dst, src net.Conn) {
		defer copies.Done()
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	copies.Wait()
}
