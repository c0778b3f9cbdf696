// Command capi-manager runs Cluster API's core controllers, the kubeadm bootstrap and
// control-plane providers and the development infrastructure provider (DevCluster and
// DevMachine with the in-memory backend) in one process. Upstream ships each as its own
// Deployment; a local control plane on a laptop pays for every process it starts (its
// binary's pages, a Go runtime, an informer cache of the same Clusters, Machines and
// Secrets), so provisioner runs them as one manager with one cache of the management
// cluster and one cache of each workload cluster (docs/architecture.md, "Footprint").
//
// --providers names the providers to run, by their clusterctl names; the local control
// plane passes those whose CRDs it installed. Every controller and webhook is Cluster
// API's own, set up as its upstream main sets it up.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/apiwarnings"
	capicontroller "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/flags"
	"sigs.k8s.io/cluster-api/version"
)

// controllerName is the manager's name in user agents and controller metrics.
const controllerName = "provisioner-capi-manager"

var setupLog = ctrl.Log.WithName("setup")

// options are the manager's flags; each default is written where the flag is declared.
type options struct {
	showVersion       bool
	providers         []string
	leaderElect       bool
	syncPeriod        time.Duration
	restConfigQPS     float32
	restConfigBurst   int
	clusterCacheQPS   float32
	clusterCacheBurst int
	clusterCacheRetry time.Duration
	rateLimitInterval time.Duration
	webhookPort       int
	webhookCertDir    string
	webhookCertName   string
	webhookKeyName    string
	healthAddr        string
	profilerAddress   string
	skipCRDMigration  []string
	managerOptions    flags.ManagerOptions
	logOptions        *logs.Options
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	logsv1.AddFlags(o.logOptions, fs)
	fs.BoolVar(&o.showVersion, "version", false, "Print the Cluster API version this manager is built from, and exit.")
	fs.StringSliceVar(&o.providers, "providers", providerNames(),
		"Providers to run, by clusterctl name: each one's controllers and webhooks. Its CRDs must be installed.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Enable leader election, for more than one replica of this manager.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute,
		"The minimum interval at which watched resources are reconciled.")
	fs.Float32Var(&o.restConfigQPS, "kube-api-qps", 100,
		"Queries per second to the management cluster's API server.")
	fs.IntVar(&o.restConfigBurst, "kube-api-burst", 200,
		"Burst of queries to the management cluster's API server.")
	fs.Float32Var(&o.clusterCacheQPS, "clustercache-client-qps", 20,
		"Queries per second to each workload cluster's API server.")
	fs.IntVar(&o.clusterCacheBurst, "clustercache-client-burst", 30,
		"Burst of queries to each workload cluster's API server.")
	fs.DurationVar(&o.clusterCacheRetry, "clustercache-connection-retry-interval", 2*time.Second,
		"How soon the cluster cache tries again to connect to a workload cluster's API server after a "+
			"failed attempt (upstream: 30s). It first tries once the Cluster's infrastructure is provisioned, "+
			"before the API server runs; everything that reads the workload cluster (add-ons, node refs, "+
			"the control plane's initialization) waits for that connection.")
	fs.DurationVar(&o.rateLimitInterval, "reconcile-rate-limit-interval", time.Second,
		"How often at most Cluster API's controllers reconcile one object while the ReconcilerRateLimiting "+
			"gate is on (upstream: a fixed 1s). Every reconcile that follows an object's own write waits for it; "+
			"the local control plane, with a handful of objects, sets 100ms. The gate's cache consistency check "+
			"runs either way.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the webhook server (every provider's webhooks).")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/", "Directory of the webhook server's certificate and key.")
	fs.StringVar(&o.webhookCertName, "webhook-cert-name", "tls.crt", "Webhook certificate file name.")
	fs.StringVar(&o.webhookKeyName, "webhook-key-name", "tls.key", "Webhook key file name.")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "Address of the health and readiness endpoints.")
	fs.StringVar(&o.profilerAddress, "profiler-address", "", "Address of the pprof endpoints; empty: none.")
	fs.StringSliceVar(&o.skipCRDMigration, "skip-crd-migration-phases", []string{},
		"CRD migration phases to skip: StorageVersionMigration, CleanupManagedFields.")
	flags.AddManagerOptions(fs, &o.managerOptions)
	feature.MutableGates.AddFlag(fs)
}

func main() {
	opts := &options{logOptions: logs.NewOptions()}
	opts.addFlags(pflag.CommandLine)
	agentOptions.AddFlags(flag.CommandLine)
	pflag.CommandLine.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	pflag.CommandLine.AddGoFlagSet(flag.CommandLine) // --kubeconfig, registered by controller-runtime
	// Cluster API's managers log at level 2 unless told otherwise.
	if err := pflag.CommandLine.Set("v", "2"); err != nil {
		fmt.Fprintf(os.Stderr, "capi-manager: %v\n", err)
		os.Exit(1)
	}
	pflag.Parse()
	if opts.showVersion {
		fmt.Println(version.Get().GitVersion)
		return
	}
	if err := logsv1.ValidateAndApply(opts.logOptions, nil); err != nil {
		fmt.Fprintf(os.Stderr, "capi-manager: %v\n", err)
		os.Exit(1)
	}
	ctrl.SetLogger(klog.Background())
	setupLog.Info("Starting", "version", version.Get().String(), "providers", opts.providers)

	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		setupLog.Error(err, "capi-manager stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, opts *options) error {
	selected, err := selectProviders(opts.providers)
	if err != nil {
		return err
	}
	if opts.rateLimitInterval <= 0 {
		return fmt.Errorf("--reconcile-rate-limit-interval is %s: give a positive duration, such as 1s (upstream's) or 100ms", opts.rateLimitInterval)
	}
	// Read by Cluster API's controller builder when each controller is set up (a build-time
	// patch: scripts/bundle/patches.ts), so it is set before any.
	capicontroller.ProvisionerRateLimitInterval = opts.rateLimitInterval
	// The Runtime SDK client lives in an internal package of Cluster API that only its own
	// mains may import; the gates that need it stay off here rather than half-working.
	for _, gate := range []featuregate.Feature{feature.RuntimeSDK, feature.InPlaceUpdates} {
		if feature.Gates.Enabled(gate) {
			return fmt.Errorf("feature gate %s is not supported by this manager: it needs Cluster API's Runtime SDK client, which only upstream's own managers carry", gate)
		}
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	restConfig.QPS = opts.restConfigQPS
	restConfig.Burst = opts.restConfigBurst
	restConfig.UserAgent = remote.DefaultClusterAPIUserAgent(controllerName)
	restConfig.WarningHandler = apiwarnings.DefaultHandler(klog.Background().WithName("API Server Warning"))

	minVersion := version.MinimumKubernetesVersion
	if feature.Gates.Enabled(feature.ClusterTopology) {
		minVersion = version.MinimumKubernetesVersionClusterTopology
	}
	if err := version.CheckKubernetesVersion(restConfig, minVersion); err != nil {
		return err
	}
	tlsOptions, metricsOptions, err := flags.GetManagerOptions(opts.managerOptions)
	if err != nil {
		return fmt.Errorf("invalid flags: %w", err)
	}

	scheme := newScheme(selected)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Controller: config.Controller{
			UsePriorityQueue: ptr.To(feature.Gates.Enabled(feature.PriorityQueue)),
			CacheSyncTimeout: 5 * time.Minute, // upstream's: a large management cluster syncs slowly
		},
		Scheme:                     scheme,
		LeaderElection:             opts.leaderElect,
		LeaderElectionID:           "controller-leader-election-provisioner-capi",
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		HealthProbeBindAddress:     opts.healthAddr,
		PprofBindAddress:           opts.profilerAddress,
		Metrics:                    *metricsOptions,
		Cache:                      sharedCacheOptions(scheme, opts.syncPeriod),
		Client:                     clientOptions(selected),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:     opts.webhookPort,
			CertDir:  opts.webhookCertDir,
			CertName: opts.webhookCertName,
			KeyName:  opts.webhookKeyName,
			TLSOpts:  tlsOptions,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}

	var shared *sharedParts
	if slices.ContainsFunc(selected, func(p *provider) bool { return p.usesClusterAPI }) {
		if shared, err = newSharedParts(ctx, mgr, opts); err != nil {
			return err
		}
	}
	// One CRD migrator for every selected provider's kinds: a manager runs one controller of a name.
	migrations := map[client.Object]crdmigrator.ByObjectConfig{}
	for _, p := range selected {
		for obj, cfg := range p.crdMigration() {
			migrations[obj] = cfg
		}
	}
	if len(migrations) > 0 {
		if err := setupCRDMigrator(ctx, mgr, opts, migrations); err != nil {
			return err
		}
	}
	for _, p := range selected {
		if err := p.setupControllers(ctx, mgr, shared); err != nil {
			return fmt.Errorf("%s: controllers: %w", p.name, err)
		}
		if err := p.setupWebhooks(mgr); err != nil {
			return fmt.Errorf("%s: webhooks: %w", p.name, err)
		}
	}
	for _, p := range selected {
		if p.beforeStart == nil {
			continue
		}
		if err := p.beforeStart(ctx, mgr); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	setupLog.Info("Starting manager")
	return mgr.Start(ctx)
}

// setupCRDMigrator runs one CRD migrator for every selected provider's kinds: a manager runs
// one controller of a name.
func setupCRDMigrator(ctx context.Context, mgr ctrl.Manager, opts *options, migrations map[client.Object]crdmigrator.ByObjectConfig) error {
	skip := make([]crdmigrator.Phase, 0, len(opts.skipCRDMigration))
	for _, phase := range opts.skipCRDMigration {
		skip = append(skip, crdmigrator.Phase(phase))
	}
	if err := (&crdmigrator.CRDMigrator{
		Client:                 mgr.GetClient(),
		APIReader:              mgr.GetAPIReader(),
		SkipCRDMigrationPhases: skip,
		Config:                 migrations,
	}).SetupWithManager(ctx, mgr, concurrency(1)); err != nil { // one at a time, as upstream: never a burst of patches
		return fmt.Errorf("setting up the CRD migrator: %w", err)
	}
	return nil
}

// clientOptions are the core manager's client options (Secrets and ConfigMaps always read
// live, unstructured objects, the providers' kinds, from the cache) plus what the selected
// providers read live. A manager that runs no Cluster API controller reads Clusters and
// Machines live too, so it starts where Cluster API's CRDs are not installed.
func clientOptions(selected []*provider) client.Options {
	options := setup.ManagerClientOptions()
	usesClusterAPI := false
	for _, p := range selected {
		options.Cache.DisableFor = append(options.Cache.DisableFor, p.uncached...)
		usesClusterAPI = usesClusterAPI || p.usesClusterAPI
	}
	if !usesClusterAPI {
		options.Cache.DisableFor = append(options.Cache.DisableFor, &clusterv1.Cluster{}, &clusterv1.Machine{})
	}
	return options
}

// sharedParts are what upstream's managers each build for themselves and this one builds
// once: the client that reads labelled Secrets from the cache, and the cache of every
// workload cluster.
type sharedParts struct {
	secretCachingClient client.Client
	clusterCache        clustercache.ClusterCache
}

func newSharedParts(ctx context.Context, mgr ctrl.Manager, opts *options) (*sharedParts, error) {
	secretCachingClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("creating the secret caching client: %w", err)
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		// The core manager's: whole Nodes with the provider ID index (the Machine controller
		// needs them; the control-plane provider reads the fields it uses of them), and no
		// Pods cached (read live while draining, and by the control-plane provider's checks).
		Cache:  setup.ClusterCacheCacheOptions(),
		Client: setup.ClusterCacheClientOptions(controllerName, opts.clusterCacheQPS, opts.clusterCacheBurst),
	}, concurrency(100))
	if err != nil {
		return nil, fmt.Errorf("creating the cluster cache: %w", err)
	}
	// Not part of the ClusterCache interface: upstream sets it in its own tests only.
	retry, ok := clusterCache.(interface{ SetConnectionCreationRetryInterval(time.Duration) })
	if !ok {
		return nil, errors.New("this Cluster API version's cluster cache has no SetConnectionCreationRetryInterval: --clustercache-connection-retry-interval cannot be applied")
	}
	retry.SetConnectionCreationRetryInterval(opts.clusterCacheRetry)
	return &sharedParts{secretCachingClient: secretCachingClient, clusterCache: clusterCache}, nil
}

func selectProviders(names []string) ([]*provider, error) {
	if len(names) == 0 {
		return nil, errors.New("--providers names none: name at least one of " + strings.Join(providerNames(), ", "))
	}
	var selected []*provider
	for _, p := range allProviders() {
		if slices.Contains(names, p.name) {
			selected = append(selected, p)
		}
	}
	for _, name := range names {
		if !slices.ContainsFunc(selected, func(p *provider) bool { return p.name == name }) {
			return nil, fmt.Errorf("--providers: unknown provider %q; this manager runs %s", name, strings.Join(providerNames(), ", "))
		}
	}
	return selected, nil
}

func concurrency(c int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: c}
}
