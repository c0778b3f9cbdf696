// Command provisioner-agent-manager runs the agent provider's controllers (registration
// tokens, host registrations, hosts, and the Cluster API infrastructure kinds HostCluster
// and HostMachine) and its webhooks (NodePlan, HostRegistration, the infrastructure kinds).
// Its flags are named like Cluster API's managers', so the local control plane starts
// it like the other providers; every listener binds to loopback unless told otherwise.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"provisioner.dev/provider/internal/version"
	"provisioner.dev/provider/setup"
)

// bindAddressEnv, when set, is the address every listener binds to by default (the
// local control plane sets it to 127.0.0.1 for every provider).
const bindAddressEnv = "PROVISIONER_BIND_ADDRESS"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner-agent-manager:", err)
		os.Exit(1)
	}
}

func run() error {
	loopback := "127.0.0.1"
	if v := os.Getenv(bindAddressEnv); v != "" {
		loopback = v
	}
	var (
		webhookHost         = flag.String("webhook-host", loopback, "Address the webhook server binds to. Default: $"+bindAddressEnv+", else 127.0.0.1.")
		webhookPort         = flag.Int("webhook-port", 9443, "Webhook server port.")
		webhookCertDir      = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with the webhook server's tls.crt and tls.key.")
		healthAddr          = flag.String("health-addr", loopback+":9440", "Address of the health endpoints (/healthz, /readyz).")
		diagnosticsAddr     = flag.String("diagnostics-address", loopback+":8443", "Address of the metrics endpoint; \"0\" turns it off.")
		insecureDiagnostics = flag.Bool("insecure-diagnostics", false, "Serve metrics over plain http with no authentication (only sensible on loopback). Default: https with the API server's authentication and authorization.")
		leaderElect         = flag.Bool("leader-elect", false, "Elect a leader among replicas (a local control plane runs one).")
		showVersion         = flag.Bool("version", false, "Print the version and exit.")
	)
	var opts setup.Options
	opts.AddFlags(flag.CommandLine)
	zapOptions := zap.Options{}
	zapOptions.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOptions)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := setup.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig (--kubeconfig or $KUBECONFIG): %w", err)
	}
	metrics := metricsserver.Options{BindAddress: *diagnosticsAddr, SecureServing: !*insecureDiagnostics}
	if !*insecureDiagnostics {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metrics,
		HealthProbeBindAddress: *healthAddr,
		LeaderElection:         *leaderElect,
		LeaderElectionID:       "agent-manager.agent.provisioner.dev",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: *webhookHost, Port: *webhookPort, CertDir: *webhookCertDir}),
		// This manager runs no Cluster API controller: Cluster and Machine are read live too,
		// so it starts where Cluster API's CRDs are not installed.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: append(setup.Uncached(), &clusterv1.Cluster{}, &clusterv1.Machine{})}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := setup.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	if err := setup.PublishServerCA(ctx, cfg, scheme, opts); err != nil {
		return err
	}
	log.Info("starting", "version", version.Version)
	return mgr.Start(ctx)
}
