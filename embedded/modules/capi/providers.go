package main

import (
	"context"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/controllers/crdmigrator"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	controlplaneadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourceset"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterresourcesetbinding"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/test/infrastructure/container"
	devv1beta1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta1"
	devv1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	devcontrollers "sigs.k8s.io/cluster-api/test/infrastructure/docker/controllers"
	devwebhooks "sigs.k8s.io/cluster-api/test/infrastructure/docker/webhooks"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	capicontrollerutil "sigs.k8s.io/cluster-api/util/controller"
	"sigs.k8s.io/cluster-api/util/index"
	"sigs.k8s.io/cluster-api/util/secret"

	agentsetup "provisioner.dev/provider/setup"
)

// provider is one Cluster API provider this manager can run: its kinds, the CRDs its
// migrator keeps at their storage version, its controllers and its webhooks.
type provider struct {
	// name is clusterctl's name of the provider, as in the bundle's components.
	name             string
	addToScheme      []func(*runtime.Scheme) error
	crdMigration     func() map[client.Object]crdmigrator.ByObjectConfig
	setupControllers func(ctx context.Context, mgr ctrl.Manager, shared *sharedParts) error
	setupWebhooks    func(mgr ctrl.Manager) error
	// usesClusterAPI: its controllers read Cluster API's objects through the shared parts
	// (the workload clusters' cache, the secret caching client) and the cache of Clusters
	// and Machines. Only a manager running such a provider builds those.
	usesClusterAPI bool
	// beforeStart runs once the manager is set up, before it starts (nil: nothing).
	beforeStart func(ctx context.Context, mgr ctrl.Manager) error
	// uncached are kinds its client reads live rather than from the shared cache.
	uncached []client.Object
}

// Upstream's defaults of the settings its managers take as flags and this one fixes: the
// workers of each controller, and how long a workload cluster may be unreachable.
const (
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
	etcdDialTimeout             = 10 * time.Second
)

func allProviders() []*provider {
	return []*provider{coreProvider(), kubeadmBootstrapProvider(), kubeadmControlPlaneProvider(), devInfrastructureProvider(), agentProvider()}
}

func providerNames() []string {
	var names []string
	for _, p := range allProviders() {
		names = append(names, p.name)
	}
	return names
}

// newScheme holds every version of the selected providers' kinds, the older ones too: their
// webhooks register conversions, which need both ends (the CRDs here serve one version, so
// the API server never calls them).
func newScheme(providers []*provider) *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme} {
		_ = add(scheme)
	}
	for _, p := range providers {
		for _, add := range p.addToScheme {
			_ = add(scheme)
		}
	}
	return scheme
}

// sharedCacheOptions is the one informer cache of the management cluster, the union of
// what the four upstream managers cache: Secrets labelled with a cluster name (their data
// kept only for the purposes the kubeadm providers read: CAs, kubeconfigs, service-account
// keys), and every other watched kind whole. Upstream's control-plane and bootstrap managers
// strip fields of worker Machines and MachineSets in their own caches; here the core
// controllers read the same objects, so nothing else is stripped.
func sharedCacheOptions(scheme *runtime.Scheme, syncPeriod time.Duration) ctrlcache.Options {
	hasClusterName, _ := labels.NewRequirement(clusterv1.ClusterNameLabel, selection.Exists, nil)
	return ctrlcache.Options{
		SyncPeriod: &syncPeriod,
		ByObject: map[client.Object]ctrlcache.ByObject{
			&corev1.Secret{}: {
				Label: labels.NewSelector().Add(*hasClusterName),
				Transform: func(in any) (any, error) {
					if s, ok := in.(*corev1.Secret); ok {
						s.SetManagedFields(nil)
						if !secret.HasPurposeSuffix(s.Name) {
							s.Data = nil
						}
					}
					return in, nil
				},
			},
		},
		NewInformer: capicontrollerutil.NewInformerFunc(scheme, controllerName),
	}
}

// coreProvider is Cluster API itself: Clusters, Machines, their sets and deployments,
// ClusterClass topologies, health checks and ClusterResourceSets.
func coreProvider() *provider {
	return &provider{
		name:           "cluster-api",
		usesClusterAPI: true,
		addToScheme: []func(*runtime.Scheme) error{storagev1.AddToScheme, clusterv1beta1.AddToScheme,
			addonsv1beta1.AddToScheme, addonsv1.AddToScheme, runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
			ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme},
		crdMigration: func() map[client.Object]crdmigrator.ByObjectConfig {
			withStatus := crdmigrator.ByObjectConfig{UseCache: false, UseStatusForStorageVersionMigration: true}
			config := map[client.Object]crdmigrator.ByObjectConfig{
				&addonsv1.ClusterResourceSetBinding{}: {UseCache: false},
				&addonsv1.ClusterResourceSet{}:        withStatus,
				&clusterv1.Cluster{}:                  withStatus,
				&clusterv1.MachineDeployment{}:        withStatus,
				&clusterv1.MachineDrainRule{}:         {UseCache: false},
				&clusterv1.MachineHealthCheck{}:       withStatus,
				&clusterv1.Machine{}:                  withStatus,
				&clusterv1.MachineSet{}:               withStatus,
				&ipamv1.IPAddress{}:                   {UseCache: false},
				&ipamv1.IPAddressClaim{}:              withStatus,
			}
			if feature.Gates.Enabled(feature.ClusterTopology) {
				config[&clusterv1.ClusterClass{}] = withStatus
			}
			if feature.Gates.Enabled(feature.MachinePool) {
				config[&clusterv1.MachinePool{}] = withStatus
			}
			return config
		},
		setupControllers: setupCoreControllers,
		setupWebhooks: func(mgr ctrl.Manager) error {
			return setupAll(mgr,
				&coreadmission.ClusterClass{Client: mgr.GetClient()},
				&coreadmission.Machine{},
				&coreadmission.MachineSet{},
				&coreadmission.MachineDeployment{},
				&coreadmission.MachineDrainRule{},
				&coreadmission.MachinePool{},
				&coreadmission.ClusterResourceSet{},
				&coreadmission.ClusterResourceSetBinding{},
				&coreadmission.MachineHealthCheck{},
				&coreadmission.ExtensionConfig{},
				// The API reader: caching every IPAddressClaim for one lookup costs more than it saves.
				&coreadmission.IPAddress{Client: mgr.GetAPIReader()},
				&coreadmission.IPAddressClaim{},
			)
		},
	}
}

func setupCoreControllers(ctx context.Context, mgr ctrl.Manager, shared *sharedParts) error {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return err
	}
	// The Cluster webhook reads the cluster cache, so it is set up here, where that exists.
	if err := (&coreadmission.Cluster{Client: mgr.GetClient(), ClusterCacheReader: shared.clusterCache}).SetupWebhookWithManager(mgr); err != nil {
		return err
	}
	// ClusterResourceSets watch Secrets of any name: their metadata in a cache of its own.
	partialSecretCache, err := ctrlcache.New(mgr.GetConfig(), ctrlcache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(partialSecretCache); err != nil {
		return err
	}
	cc := shared.clusterCache
	reconcilers := []func() error{
		func() error {
			return (&cluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				RemoteConnectionGracePeriod: remoteConnectionGracePeriod}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&machine.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod}).SetupWithManager(ctx, mgr, concurrency(100))
		},
		func() error {
			return (&machineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
				PreflightChecks: sets.New(clusterv1.MachineSetPreflightCheckAll)}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&machinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&clusterresourceset.Reconciler{Client: mgr.GetClient(), ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(10), partialSecretCache)
		},
		func() error {
			return (&clusterresourcesetbinding.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, concurrency(10))
		},
		func() error {
			return (&machinehealthcheck.Reconciler{Client: mgr.GetClient(), ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(50))
		},
	}
	if feature.Gates.Enabled(feature.MachinePool) {
		reconcilers = append(reconcilers, func() error {
			return (&machinepool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(50))
		})
	}
	if feature.Gates.Enabled(feature.ClusterTopology) {
		reconcilers = append(reconcilers,
			func() error {
				return (&clusterclass.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, concurrency(10))
			},
			func() error {
				return (&topologycluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc}).SetupWithManager(ctx, mgr, concurrency(50))
			},
			func() error {
				return (&topologymachinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, concurrency(25))
			},
			func() error {
				return (&topologymachineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(ctx, mgr, concurrency(25))
			},
		)
	}
	for _, setup := range reconcilers {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}

// kubeadmBootstrapProvider turns KubeadmConfigs into the bootstrap data of machines.
func kubeadmBootstrapProvider() *provider {
	return &provider{
		name:           "bootstrap-kubeadm",
		usesClusterAPI: true,
		addToScheme:    []func(*runtime.Scheme) error{bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme},
		crdMigration: func() map[client.Object]crdmigrator.ByObjectConfig {
			return map[client.Object]crdmigrator.ByObjectConfig{
				&bootstrapv1.KubeadmConfig{}:         {UseCache: false, UseStatusForStorageVersionMigration: true},
				&bootstrapv1.KubeadmConfigTemplate{}: {UseCache: false},
			}
		},
		setupControllers: func(ctx context.Context, mgr ctrl.Manager, shared *sharedParts) error {
			return (&kubeadmconfig.Reconciler{
				Client:              mgr.GetClient(),
				SecretCachingClient: shared.secretCachingClient,
				APIReader:           mgr.GetAPIReader(),
				ClusterCache:        shared.clusterCache,
				TokenTTL:            kubeadmconfig.DefaultTokenTTL,
			}).SetupWithManager(ctx, mgr, concurrency(100))
		},
		setupWebhooks: func(mgr ctrl.Manager) error {
			return setupAll(mgr, &bootstrapadmission.KubeadmConfig{}, &bootstrapadmission.KubeadmConfigTemplate{})
		},
	}
}

// kubeadmControlPlaneProvider runs KubeadmControlPlanes: control-plane machines and their etcd.
func kubeadmControlPlaneProvider() *provider {
	return &provider{
		name:           "control-plane-kubeadm",
		usesClusterAPI: true,
		addToScheme:    []func(*runtime.Scheme) error{controlplanev1beta1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, runtimev1.AddToScheme},
		crdMigration: func() map[client.Object]crdmigrator.ByObjectConfig {
			return map[client.Object]crdmigrator.ByObjectConfig{
				&controlplanev1.KubeadmControlPlane{}:         {UseCache: false, UseStatusForStorageVersionMigration: true},
				&controlplanev1.KubeadmControlPlaneTemplate{}: {UseCache: false},
			}
		},
		setupControllers: func(ctx context.Context, mgr ctrl.Manager, shared *sharedParts) error {
			etcdLogger, err := logutil.CreateDefaultZapLogger(zapcore.InfoLevel)
			if err != nil {
				return err
			}
			return (&kubeadmcontrolplane.Reconciler{
				Client:                      mgr.GetClient(),
				APIReader:                   mgr.GetAPIReader(),
				SecretCachingClient:         shared.secretCachingClient,
				ClusterCache:                shared.clusterCache,
				EtcdDialTimeout:             etcdDialTimeout,
				EtcdCallTimeout:             etcd.DefaultCallTimeout,
				EtcdLogger:                  etcdLogger,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
			}).SetupWithManager(ctx, mgr, controller.Options{
				MaxConcurrentReconciles: 100,
				// Upstream's: a reconcile talks to every etcd member, and those calls add up.
				ReconciliationTimeout: 3 * time.Minute,
			})
		},
		setupWebhooks: func(mgr ctrl.Manager) error {
			return setupAll(mgr,
				&controlplaneadmission.KubeadmControlPlane{},
				&controlplaneadmission.ScaleValidator{Client: mgr.GetClient()},
				&controlplaneadmission.KubeadmControlPlaneTemplate{},
			)
		},
	}
}

// devInfrastructureProvider is Cluster API's development provider (DevCluster, DevMachine
// and their Docker kinds); provisioner's in-memory platform uses its in-memory backend,
// which simulates machines, nodes and their API servers inside this process.
func devInfrastructureProvider() *provider {
	return &provider{
		name:           "infrastructure-docker",
		usesClusterAPI: true,
		addToScheme:    []func(*runtime.Scheme) error{devv1beta1.AddToScheme, devv1.AddToScheme},
		crdMigration: func() map[client.Object]crdmigrator.ByObjectConfig {
			cached := crdmigrator.ByObjectConfig{UseCache: true, UseStatusForStorageVersionMigration: true}
			uncached := crdmigrator.ByObjectConfig{UseCache: false}
			config := map[client.Object]crdmigrator.ByObjectConfig{
				&devv1.DockerCluster{}: cached, &devv1.DockerClusterTemplate{}: uncached,
				&devv1.DockerMachine{}: cached, &devv1.DockerMachineTemplate{}: uncached,
				&devv1.DevCluster{}: cached, &devv1.DevClusterTemplate{}: uncached,
				&devv1.DevMachine{}: cached, &devv1.DevMachineTemplate{}: uncached,
			}
			if feature.Gates.Enabled(feature.MachinePool) {
				config[&devv1.DockerMachinePool{}] = crdmigrator.ByObjectConfig{UseCache: true}
				config[&devv1.DockerMachinePoolTemplate{}] = uncached
				config[&devv1.DevMachinePool{}] = crdmigrator.ByObjectConfig{UseCache: true}
				config[&devv1.DevMachinePoolTemplate{}] = uncached
			}
			return config
		},
		setupControllers: setupDevControllers,
		setupWebhooks: func(mgr ctrl.Manager) error {
			return setupAll(mgr,
				&devwebhooks.DockerMachine{}, &devwebhooks.DockerMachineTemplate{},
				&devwebhooks.DockerCluster{}, &devwebhooks.DockerClusterTemplate{},
				&devwebhooks.DevMachine{}, &devwebhooks.DevMachineTemplate{},
				&devwebhooks.DevCluster{}, &devwebhooks.DevClusterTemplate{},
			)
		},
	}
}

func setupDevControllers(ctx context.Context, mgr ctrl.Manager, shared *sharedParts) error {
	// The in-memory backend's own scheme: the kinds of the simulated workload clusters.
	inMemoryScheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{cloudv1.AddToScheme, corev1.AddToScheme, clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		_ = add(inMemoryScheme)
	}
	inMemoryManager := inmemoryruntime.NewManager(inMemoryScheme)
	if err := inMemoryManager.Start(ctx); err != nil {
		return err
	}
	// The simulated API servers listen on POD_IP (the local control plane sets loopback).
	apiServerMux, err := inmemoryserver.NewWorkloadClustersMux(inMemoryManager, os.Getenv("POD_IP"))
	if err != nil {
		return err
	}
	// A client only: nothing connects to a Docker daemon until a Docker-backed kind is reconciled.
	containerRuntime, err := container.NewDockerClient()
	if err != nil {
		return err
	}
	c := mgr.GetClient()
	steps := []func() error{
		func() error {
			return (&devcontrollers.DockerMachineReconciler{Client: c, ContainerRuntime: containerRuntime, ClusterCache: shared.clusterCache}).
				SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 100, ReconciliationTimeout: 6 * time.Minute})
		},
		func() error {
			return (&devcontrollers.DockerClusterReconciler{Client: c, ContainerRuntime: containerRuntime}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&devcontrollers.DockerMachineTemplateReconciler{Client: c, ContainerRuntime: containerRuntime}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&devcontrollers.DevMachineReconciler{Client: c, ContainerRuntime: containerRuntime, ClusterCache: shared.clusterCache,
				InMemoryManager: inMemoryManager, APIServerMux: apiServerMux}).
				SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 50, ReconciliationTimeout: 5 * time.Minute})
		},
		func() error {
			return (&devcontrollers.DevClusterReconciler{Client: c, ContainerRuntime: containerRuntime,
				InMemoryManager: inMemoryManager, APIServerMux: apiServerMux}).SetupWithManager(ctx, mgr, concurrency(50))
		},
		func() error {
			return (&devcontrollers.DevMachineTemplateReconciler{Client: c, ContainerRuntime: containerRuntime}).SetupWithManager(ctx, mgr, concurrency(50))
		},
	}
	if feature.Gates.Enabled(feature.MachinePool) {
		steps = append(steps,
			func() error {
				return (&devcontrollers.DockerMachinePoolReconciler{Client: c, ContainerRuntime: containerRuntime}).SetupWithManager(ctx, mgr, concurrency(50))
			},
			func() error {
				return (&devcontrollers.DevMachinePoolReconciler{Client: c, ContainerRuntime: containerRuntime}).SetupWithManager(ctx, mgr, concurrency(100))
			},
		)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// webhookSetup is what every Cluster API webhook type offers.
type webhookSetup interface {
	SetupWebhookWithManager(mgr ctrl.Manager) error
}

func setupAll(mgr ctrl.Manager, webhooks ...webhookSetup) error {
	for _, w := range webhooks {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}

// agentOptions are the agent provider's flags (provider/setup declares them and their defaults).
var agentOptions agentsetup.Options

// agentProvider is provisioner's own provider (provider/ in this repository): host
// registration, NodePlans, and the infrastructure kinds of machines on registered hosts
// (HostCluster, HostMachine), with their webhooks. Its CRDs serve one version, so it has
// nothing to migrate; it publishes the API server's CA for agents before the manager starts.
func agentProvider() *provider {
	return &provider{
		name:         agentsetup.ProviderName,
		addToScheme:  []func(*runtime.Scheme) error{agentsetup.AddToScheme},
		crdMigration: func() map[client.Object]crdmigrator.ByObjectConfig { return nil },
		setupControllers: func(_ context.Context, mgr ctrl.Manager, _ *sharedParts) error {
			return agentsetup.SetupWithManager(mgr, agentOptions)
		},
		setupWebhooks: func(ctrl.Manager) error { return nil }, // SetupWithManager sets up its webhooks too
		beforeStart: func(ctx context.Context, mgr ctrl.Manager) error {
			return agentsetup.PublishServerCA(ctx, mgr.GetConfig(), mgr.GetScheme(), agentOptions)
		},
		uncached: agentsetup.Uncached(),
	}
}
