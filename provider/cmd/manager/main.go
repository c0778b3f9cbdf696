// Command provisioner-agent-manager runs the agent provider's controllers (registration
// tokens, host registrations, hosts, and the Cluster API infrastructure kinds HostCluster
// and HostMachine) and its webhooks (NodePlan, HostRegistration, the infrastructure kinds).
// Its flags are named like Cluster API's managers', so the local control plane starts
// it like the other providers; every listener binds to loopback unless told otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
	"provisioner.dev/provider/internal/controller"
	"provisioner.dev/provider/internal/version"
	"provisioner.dev/provider/internal/webhooks"
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
		webhookHost           = flag.String("webhook-host", loopback, "Address the webhook server binds to. Default: $"+bindAddressEnv+", else 127.0.0.1.")
		webhookPort           = flag.Int("webhook-port", 9443, "Webhook server port.")
		webhookCertDir        = flag.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with the webhook server's tls.crt and tls.key.")
		healthAddr            = flag.String("health-addr", loopback+":9440", "Address of the health endpoints (/healthz, /readyz).")
		diagnosticsAddr       = flag.String("diagnostics-address", loopback+":8443", "Address of the metrics endpoint; \"0\" turns it off.")
		insecureDiagnostics   = flag.Bool("insecure-diagnostics", false, "Serve metrics over plain http with no authentication (only sensible on loopback). Default: https with the API server's authentication and authorization.")
		leaderElect           = flag.Bool("leader-elect", false, "Elect a leader among replicas (a local control plane runs one).")
		registrationNamespace = flag.String("registration-namespace", agentv1.DefaultRegistrationNamespace, "Namespace of RegistrationTokens and HostRegistrations.")
		agentTokenTTL         = flag.Duration("agent-token-ttl", 720*time.Hour, "Lifetime of a granted agent token; agents renew theirs when a third is left.")
		hostResetTimeout      = flag.Duration("host-reset-timeout", controller.DefaultHostResetTimeout, "How long a deleted HostMachine waits for its Host's reset plan to be Applied before it releases the Host anyway (an agent that is gone must not block deletion), with a Warning event.")
		nodeArtifacts         = flag.String("node-artifacts-configmap", controller.DefaultArtifactsConfigMap.String(), "ConfigMap (namespace/name, key artifacts.json) listing the node binaries and image archives every host's bootstrap plan downloads; absent means none.")
		showVersion           = flag.Bool("version", false, "Print the version and exit.")
	)
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
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := agentv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := clusterv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := poolv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := ipamv1.AddToScheme(scheme); err != nil {
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
		Client: client.Options{Cache: &client.CacheOptions{
			// Read directly: caching every Secret and ServiceAccount of the cluster would
			// cost memory and a watch each, for objects read once per registration.
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.ServiceAccount{}, &corev1.Namespace{},
				&rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
				// Cluster API's kinds are read once per reconcile of a HostCluster or HostMachine,
				// and uncached the manager also runs where Cluster API's CRDs are not installed.
				&clusterv1.Cluster{}, &clusterv1.Machine{}},
		}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	if err := (&controller.RegistrationTokenReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostRegistrationReconciler{Client: mgr.GetClient(), AgentTokenTTL: *agentTokenTTL}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return err
	}
	artifactsNS, artifactsName, ok := strings.Cut(*nodeArtifacts, "/")
	if !ok || artifactsNS == "" || artifactsName == "" {
		return fmt.Errorf("--node-artifacts-configmap %q: want namespace/name", *nodeArtifacts)
	}
	// One discovery client for every "does the API server serve this kind" question at start-up.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	watchMachines := serves(dc, clusterv1.GroupVersion.String(), "Machine")
	if err := (&controller.HostMachineReconciler{
		WatchMachines:      watchMachines,
		Client:             mgr.GetClient(),
		Reader:             mgr.GetAPIReader(),
		Recorder:           mgr.GetEventRecorder("hostmachine-controller"),
		ResetTimeout:       *hostResetTimeout,
		ArtifactsConfigMap: types.NamespacedName{Namespace: artifactsNS, Name: artifactsName},
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupAddressPools(mgr, dc); err != nil {
		return err
	}
	if err := setupWebhooks(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	if err := publishServerCA(ctx, cfg, scheme, *registrationNamespace); err != nil {
		return err
	}
	log.Info("starting", "version", version.Version)
	return mgr.Start(ctx)
}

// publishServerCA publishes the CA of the kubeconfig the manager runs with, so agents can
// fetch it and check it against their pinned checksum.
func publishServerCA(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) error {
	caPEM := cfg.CAData
	if len(caPEM) == 0 && cfg.CAFile != "" {
		var err error
		if caPEM, err = os.ReadFile(cfg.CAFile); err != nil {
			return fmt.Errorf("read the kubeconfig's CA file: %w", err)
		}
	}
	if len(caPEM) == 0 {
		return fmt.Errorf("the kubeconfig has no certificate-authority: agents pin the server's CA, so the manager needs it")
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	return controller.PublishServerCA(ctx, c, namespace, caPEM)
}

// setupWebhooks registers every kind's validating webhook (AddressPool's too: it needs
// only its own CRD), with the uncached reader for those that read other objects.
func setupWebhooks(mgr ctrl.Manager) error {
	for _, webhook := range []interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		&webhooks.NodePlan{Client: mgr.GetAPIReader()},
		&webhooks.HostRegistration{Client: mgr.GetAPIReader()},
		&webhooks.HostCluster{},
		&webhooks.HostClusterTemplate{},
		&webhooks.HostMachine{},
		&webhooks.HostMachineTemplate{},
		&webhooks.AddressPool{},
	} {
		if err := webhook.SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}

// setupAddressPools serves AddressPools (the IPAddressClaim controller that allocates
// from them) where the API server serves Cluster API's IPAM kinds (its core
// provider's CRDs): a management cluster without them has no claim to serve, and the
// manager's other controllers run there as before.
func setupAddressPools(mgr ctrl.Manager, dc discovery.DiscoveryInterface) error {
	log := ctrl.Log.WithName("setup")
	for _, want := range [][2]string{{ipamv1.GroupVersion.String(), "IPAddressClaim"}, {poolv1.GroupVersion.String(), poolv1.Kind}} {
		if !serves(dc, want[0], want[1]) {
			log.Info("the API server serves no " + want[0] + " " + want[1] + ": the AddressPool controller does not run")
			return nil
		}
	}
	return (&controller.IPAddressClaimReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr)
}

// serves reports whether the API server serves kind in groupVersion (false when the
// group is not installed).
func serves(dc discovery.DiscoveryInterface, groupVersion, kind string) bool {
	resources, err := dc.ServerResourcesForGroupVersion(groupVersion)
	return err == nil && servesKind(resources, kind)
}

func servesKind(list *metav1.APIResourceList, kind string) bool {
	for _, r := range list.APIResources {
		if r.Kind == kind {
			return true
		}
	}
	return false
}
