// Package setup wires the agent provider into a controller-runtime manager: its kinds,
// controllers and webhooks, and the server CA it publishes for agents. Two mains use it:
// provider/cmd/manager (provisioner-agent-manager, this provider alone) and the bundle's
// capi-manager (embedded/modules/capi), which runs it beside Cluster API's providers in one
// process, as Cluster API's own core/setup package serves its managers.
package setup

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

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
	poolv1 "provisioner.dev/provider/api/ipam/v1alpha1"
	"provisioner.dev/provider/internal/controller"
	"provisioner.dev/provider/internal/webhooks"
)

// ProviderName is the provider's name as clusterctl's inventory and the bundle's components know it.
const ProviderName = "agent-provisioner"

// Options are the provider's own settings; AddFlags declares each with its default.
type Options struct {
	RegistrationNamespace string
	AgentTokenTTL         time.Duration
	HostResetTimeout      time.Duration
	// NodeArtifactsConfigMap is namespace/name of the ConfigMap listing the node files.
	NodeArtifactsConfigMap string
	// HostMachineConcurrency is how many HostMachines are reconciled at once.
	HostMachineConcurrency int
}

// AddFlags declares the provider's flags on fs, each with its default.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RegistrationNamespace, "registration-namespace", agentv1.DefaultRegistrationNamespace, "Namespace of RegistrationTokens and HostRegistrations.")
	fs.DurationVar(&o.AgentTokenTTL, "agent-token-ttl", 720*time.Hour, "Lifetime of a granted agent token; agents renew theirs when a third is left.")
	fs.DurationVar(&o.HostResetTimeout, "host-reset-timeout", controller.DefaultHostResetTimeout, "How long a deleted HostMachine waits for its Host's reset plan to be Applied before it releases the Host anyway (an agent that is gone must not block deletion), with a Warning event.")
	fs.IntVar(&o.HostMachineConcurrency, "hostmachine-concurrency", 10, "How many HostMachines are reconciled at once (as Cluster API's --machine-concurrency): one machine's API round trips do not hold back another's plan. Claims stay safe at any value: a Host is claimed by an update on its resourceVersion.")
	fs.StringVar(&o.NodeArtifactsConfigMap, "node-artifacts-configmap", controller.DefaultArtifactsConfigMap.String(), "ConfigMap (namespace/name, key artifacts.json) listing the node binaries and image archives every host's bootstrap plan downloads; absent means none.")
}

// AddToScheme adds the provider's kinds and those it reads (Cluster API's core and IPAM kinds).
func AddToScheme(scheme *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentv1.AddToScheme, infrav1.AddToScheme,
		clusterv1.AddToScheme, poolv1.AddToScheme, ipamv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	return nil
}

// Uncached are the kinds the provider reads live: caching every Secret, ServiceAccount and
// RBAC object of the cluster would cost memory and a watch each, for objects read once per
// registration. A manager that runs only this provider also reads Cluster API's Cluster and
// Machine live (once per reconcile, and so it starts where Cluster API is not installed);
// one that runs Cluster API's controllers caches those anyway.
func Uncached() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.ServiceAccount{}, &corev1.Namespace{},
		&rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}}
}

// SetupWithManager adds every controller and webhook of the provider to mgr.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	artifactsNS, artifactsName, ok := strings.Cut(opts.NodeArtifactsConfigMap, "/")
	if !ok || artifactsNS == "" || artifactsName == "" {
		return fmt.Errorf("--node-artifacts-configmap %q: want namespace/name", opts.NodeArtifactsConfigMap)
	}
	if err := (&controller.RegistrationTokenReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostRegistrationReconciler{Client: mgr.GetClient(), AgentTokenTTL: opts.AgentTokenTTL}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controller.HostClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return err
	}
	// One discovery client for every "does the API server serve this kind" question at start-up.
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := (&controller.HostMachineReconciler{
		WatchMachines:      serves(dc, clusterv1.GroupVersion.String(), "Machine"),
		Client:             mgr.GetClient(),
		Reader:             mgr.GetAPIReader(),
		Recorder:           mgr.GetEventRecorder("hostmachine-controller"),
		ResetTimeout:       opts.HostResetTimeout,
		Concurrency:        opts.HostMachineConcurrency,
		ArtifactsConfigMap: types.NamespacedName{Namespace: artifactsNS, Name: artifactsName},
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := setupAddressPools(mgr, dc); err != nil {
		return err
	}
	return setupWebhooks(mgr)
}

// PublishServerCA publishes the CA of the kubeconfig the manager runs with, so agents can
// fetch it and check it against their pinned checksum. Run it before the manager starts.
func PublishServerCA(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options) error {
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
	return controller.PublishServerCA(ctx, c, opts.RegistrationNamespace, caPEM)
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
