// Command provisioner-agent runs on a host: `register` turns a one-use import token into
// the host's own credential, `run` executes the host's NodePlans.
//
//	provisioner-agent register --server URL --ca-checksum SHA256 --token T [--roles r1,r2] [--labels k=v,...]
//	provisioner-agent run [--lock-file F]
//	provisioner-agent supervise start|stop|status --name N [--dir D] [-- COMMAND ARG...]
//
// Exit codes: 0 done, 1 failure, 2 usage (or not registered), 3 the server refused the
// token or credential (expired, used, revoked, Host deleted): only a new token helps.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/agent"
	"provisioner.dev/provider/internal/version"
)

// defaultDataDir holds the credential and, during registration, the bootstrap token.
const defaultDataDir = "/var/lib/provisioner-agent"

func main() {
	// Internal: the guard the agent runs each plan instruction under. Dispatched before the
	// agent's own signal handling, which it does not want.
	if len(os.Args) > 1 && os.Args[1] == agent.GuardCommand {
		os.Exit(agent.RunGuard(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "provisioner-agent:", err)
		var exit *agent.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		os.Exit(1)
	}
}

func usage() error {
	return &agent.ExitError{Code: agent.ExitUsage, Err: errors.New("usage: provisioner-agent register|run|supervise|version [flags] (-h for a command's flags)")}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "register":
		return register(ctx, args[1:])
	case "run":
		return runPlans(ctx, args[1:])
	case "supervise":
		return supervise(ctx, args[1:])
	case "version":
		fmt.Println(version.Version)
		return nil
	}
	return usage()
}

func register(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	dataDir := fs.String("data-dir", defaultDataDir, "Directory for the credential (0600 files).")
	server := fs.String("server", "", "API server URL, https://host:port (required on first registration).")
	caChecksum := fs.String("ca-checksum", "", "sha256 of the server CA's DER encoding, hex (required on first registration).")
	token := fs.String("token", "", "Import token. Prefer --token-file or $PROVISIONER_AGENT_TOKEN: a flag shows in the process list.")
	tokenFile := fs.String("token-file", "", "File holding the import token; deleted once registered.")
	hostName := fs.String("host-name", "", "Name of the Host to register as. Default: this machine's hostname, lowercased.")
	address := fs.String("address", "", "Address to report for this host. Default: the local address that reaches the server.")
	roles := fs.String("roles", "", "Comma-separated roles, e.g. control-plane,worker.")
	labelsFlag := fs.String("labels", "", "Comma-separated key=value labels for the Host.")
	registrationNamespace := fs.String("registration-namespace", agentv1.DefaultRegistrationNamespace, "Namespace of registrations on the server.")
	timeout := fs.Duration("timeout", 2*time.Minute, "How long to wait for the grant.")
	if err := fs.Parse(args); err != nil {
		return &agent.ExitError{Code: agent.ExitUsage, Err: err}
	}

	tok := *token
	if tok == "" {
		tok = os.Getenv("PROVISIONER_AGENT_TOKEN")
	}
	if tok == "" && *tokenFile != "" {
		raw, err := os.ReadFile(*tokenFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		tok = strings.TrimSpace(string(raw))
	}
	b := agent.Bootstrap{Server: *server, CAChecksum: *caChecksum, Token: tok, RegistrationNamespace: *registrationNamespace, Address: *address}
	if tok != "" {
		if *server == "" || *caChecksum == "" {
			return &agent.ExitError{Code: agent.ExitUsage, Err: errors.New("--server and --ca-checksum are required with a token")}
		}
		name, err := resolveHostName(*hostName)
		if err != nil {
			return err
		}
		b.HostName = name
		b.Roles = splitList(*roles)
		if b.Labels, err = parseLabels(*labelsFlag); err != nil {
			return err
		}
		if b.Address == "" {
			b.Address = localAddressTowards(*server)
		}
	}
	_, err := agent.Register(ctx, agent.RegisterOptions{DataDir: agent.DataDir(*dataDir), Bootstrap: b, TokenFile: *tokenFile, Timeout: *timeout, Out: os.Stdout})
	return err
}

func runPlans(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	dataDir := fs.String("data-dir", defaultDataDir, "Directory with the credential written by register.")
	lockFile := fs.String("lock-file", defaultDataDir+"/plan.lock", "The node's plan lock file.")
	lockStaleAfter := fs.Duration("lock-stale-after", 2*time.Minute, "A plan lock not refreshed for this long is stale and taken over (its holder refreshes it every quarter of this).")
	heartbeat := fs.Duration("heartbeat-interval", agent.DefaultHeartbeatInterval, "Interval of Host status reports and credential checks.")
	verbose := fs.Bool("v", false, "Debug logs.")
	if err := fs.Parse(args); err != nil {
		return &agent.ExitError{Code: agent.ExitUsage, Err: err}
	}
	level := zapcore.InfoLevel
	if *verbose {
		level = zapcore.DebugLevel
	}
	log := zap.New(zap.Level(level))
	ctrl.SetLogger(log)
	dir := agent.DataDir(*dataDir)
	for {
		// A hand-over prepared before a crash (or just now) is completed before the
		// agent talks to any server, so it never mixes the two credentials.
		if next, err := dir.CompleteHandover(); err != nil {
			return err
		} else if next != nil {
			log.Info("switched to the new manager's credential", "host", next.Host, "server", next.Server, "namespace", next.Namespace)
		}
		runCtx, cancel := context.WithCancelCause(ctx)
		go followHandovers(runCtx, cancel, agent.HandoverOptions{DataDir: dir, LockPath: *lockFile, LockStaleAfter: *lockStaleAfter, Out: os.Stdout}, *heartbeat, log)
		err := agent.Run(logr.NewContext(runCtx, log), agent.RunOptions{
			DataDir: dir, LockPath: *lockFile, LockStaleAfter: *lockStaleAfter, HeartbeatInterval: *heartbeat, Log: log,
		})
		cancel(nil)
		if errors.Is(err, agent.ErrFollowed) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// followHandovers looks for a hand-over at every heartbeat interval; once the new
// manager granted a credential, it stops the running agent with ErrFollowed.
func followHandovers(ctx context.Context, stop context.CancelCauseFunc, o agent.HandoverOptions, interval time.Duration, log logr.Logger) {
	t := time.NewTicker(agent.HeartbeatEvery(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ready, err := agent.PrepareHandover(ctx, o)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "hand-over")
			}
			continue
		}
		if ready {
			stop(agent.ErrFollowed)
			return
		}
	}
}

// supervise keeps one command running, detached (the kubelet on hosts without systemd):
//
//	supervise start --name kubelet [--dir D] [--restart-delay 2s] [--stop-timeout 15s] -- /usr/local/bin/kubelet ARG...
//	supervise stop --name kubelet [--dir D]
//	supervise status --name kubelet [--dir D]   (exit 0 running, 1 not)
//
// `supervise run` is the detached supervisor start launches.
func supervise(ctx context.Context, args []string) error {
	if len(args) == 0 || !slices.Contains([]string{"start", "stop", "status", "run"}, args[0]) {
		return &agent.ExitError{Code: agent.ExitUsage, Err: errors.New("usage: provisioner-agent supervise start|stop|status --name N [--dir D] [-- COMMAND ARG...]")}
	}
	action := args[0]
	fs := flag.NewFlagSet("supervise "+action, flag.ContinueOnError)
	name := fs.String("name", "", "Name of the supervised command, a DNS label (required).")
	dir := fs.String("dir", agent.DefaultSuperviseDir, "Directory of the pid file (<name>.pid), the command (<name>.json) and the log (<name>.log).")
	restartDelay := fs.Duration("restart-delay", 2*time.Second, "start: first pause before a restart (doubles up to 30s while the command keeps failing).")
	stopTimeout := fs.Duration("stop-timeout", 15*time.Second, "start, stop: how long the command gets after SIGTERM before SIGKILL.")
	if err := fs.Parse(args[1:]); err != nil {
		return &agent.ExitError{Code: agent.ExitUsage, Err: err}
	}
	s := agent.Supervised{Name: *name, Dir: *dir}
	o := agent.SuperviseOptions{Supervised: s, Command: fs.Args(), RestartDelay: *restartDelay, StopTimeout: *stopTimeout, Out: os.Stdout}
	switch action {
	case "start":
		return agent.SuperviseStart(o)
	case "stop":
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "stop-timeout" })
		if !explicit {
			o.StopTimeout = 0 // the one start recorded
		}
		return agent.SuperviseStop(o)
	case "status":
		if pid, ok := s.Running(); ok {
			fmt.Printf("%s: running (pid %d)\n", s.Name, pid)
			return nil
		}
		fmt.Printf("%s: not running\n", s.Name)
		return &agent.ExitError{Code: 1, Err: fmt.Errorf("%s is not running", s.Name)}
	}
	return agent.SuperviseRun(ctx, s)
}

var hostNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func resolveHostName(name string) (string, error) {
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", err
		}
		name = strings.ToLower(strings.SplitN(h, ".", 2)[0])
	}
	if !hostNameRE.MatchString(name) || len(name) > 58 {
		return "", &agent.ExitError{Code: agent.ExitUsage, Err: fmt.Errorf("host name %q is not a DNS label of at most 58 characters; pass --host-name", name)}
	}
	return name, nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func parseLabels(s string) (map[string]string, error) {
	items := splitList(s)
	if len(items) == 0 {
		return nil, nil
	}
	labels := map[string]string{}
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, &agent.ExitError{Code: agent.ExitUsage, Err: fmt.Errorf("--labels: %q is not key=value", item)}
		}
		labels[k] = v
	}
	return labels, nil
}

// localAddressTowards is the local address the kernel would use to reach the server
// (a UDP "connection" sends nothing); empty when it cannot tell.
func localAddressTowards(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	conn, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return ""
	}
	defer conn.Close()
	if addr, ok := conn.LocalAddr().(*net.UDPAddr); ok {
		return addr.IP.String()
	}
	return ""
}
