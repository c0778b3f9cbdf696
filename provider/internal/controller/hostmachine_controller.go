package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
	"provisioner.dev/provider/internal/hostplan"
)

// DefaultHostResetTimeout is how long a deleted HostMachine waits for its Host's reset
// plan before it releases the Host anyway (the manager's --host-reset-timeout).
const DefaultHostResetTimeout = 10 * time.Minute

// hostMachineRefAnnotation on a NodePlan is "<namespace>/<name>" of its HostMachine, so
// a plan's status change wakes the machine (the label value may be hashed).
const hostMachineRefAnnotation = "infrastructure.provisioner.dev/host-machine-ref"

const (
	purposePrepare   = "prepare"
	purposeBootstrap = "bootstrap"
	purposeReset     = "reset"
)

// HostMachineReconciler runs one Machine on one Host: it waits for the owner Machine,
// claims a free Host (labels, optimistic concurrency) and writes its prepare plan (the
// artifacts, spec.prepareCommands) in the Host's plan namespace at once; once that is
// Applied and the Machine has its bootstrap data, it turns the cloud-config into the
// bootstrap plan, and reports the machine provisioned, with providerID and addresses,
// when that is Applied. On deletion it
// runs a reset plan and releases the Host; a Host whose agent does not apply the reset
// within ResetTimeout is released anyway, with a Warning event and the HostReleased
// condition saying so.
type HostMachineReconciler struct {
	Client client.Client
	// Reader reads Hosts uncached (the manager's API reader): a claim must not be
	// missed because the cache has not seen it yet, or a machine would claim a second
	// Host. Default: Client.
	Reader client.Reader
	// Recorder records the Warning of a forced release.
	Recorder events.EventRecorder
	// ResetTimeout bounds the wait for the reset plan. Default: DefaultHostResetTimeout.
	ResetTimeout time.Duration
	// Concurrency is how many HostMachines are reconciled at once. Default: 1.
	Concurrency int
	// ArtifactsConfigMap holds (key artifacts.json, a JSON list of Artifacts) the node
	// binaries and image archives every bootstrap plan downloads, besides a machine's own
	// spec.artifacts, which win per path. It is written by whoever serves the artifacts
	// (their URLs change with the serving port, so they cannot live in immutable
	// templates); absent means none. Default: DefaultArtifactsConfigMap.
	ArtifactsConfigMap types.NamespacedName
	// WatchMachines: a Machine's update (its bootstrap data) wakes its HostMachine at once.
	// Set only where the API server serves Cluster API's Machine (a watch on a kind it does
	// not serve stops the manager); without it the requeue finds the bootstrap data.
	// Default: false.
	WatchMachines bool
}

// DefaultArtifactsConfigMap is where the hosts platform publishes the node artifacts.
var DefaultArtifactsConfigMap = types.NamespacedName{Namespace: agentv1.NodeArtifactsNamespace, Name: "node-artifacts"}

// artifactsKey is the ConfigMap key holding the artifact list.
const artifactsKey = "artifacts.json"

// +kubebuilder:rbac:groups=infrastructure.provisioner.dev,resources=hostmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.provisioner.dev,resources=hostmachines/status;hostmachines/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=agent.provisioner.dev,resources=nodeplans,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *HostMachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ResetTimeout == 0 {
		r.ResetTimeout = DefaultHostResetTimeout
	}
	if r.Reader == nil {
		r.Reader = r.Client
	}
	if r.ArtifactsConfigMap.Name == "" {
		r.ArtifactsConfigMap = DefaultArtifactsConfigMap
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.HostMachine{}, builder.WithPredicates(predicates.ResourceNotPaused(mgr.GetScheme(), mgr.GetLogger()))).
		Named("hostmachine").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Concurrency, 1)}).
		Watches(&agentv1.NodePlan{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ns, name, ok := strings.Cut(o.GetAnnotations()[hostMachineRefAnnotation], "/")
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
		}))
	if r.WatchMachines {
		// A Machine's bootstrap data (spec.bootstrap.dataSecretName) wakes its HostMachine at
		// once: the plan is written the moment it can be, not at the next requeue.
		b = b.Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(hostMachineOfMachine))
	}
	return b.Complete(r)
}

// hostMachineOfMachine maps a Machine to the HostMachine its spec.infrastructureRef names.
func hostMachineOfMachine(_ context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Spec.InfrastructureRef.Kind != "HostMachine" || m.Spec.InfrastructureRef.APIGroup != infrav1.GroupVersion.Group || m.Spec.InfrastructureRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}}}
}

func (r *HostMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	hm := &infrav1.HostMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, hm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if paused, err := isPaused(ctx, r.Client, hm); err != nil || paused {
		return ctrl.Result{}, err
	}
	// A patch, not an update: Cluster API sets the owner reference at the same time.
	if finalizerAdded, err := finalizers.EnsureFinalizer(ctx, r.Client, hm, infrav1.HostMachineFinalizer); err != nil || finalizerAdded {
		return ctrl.Result{}, err
	}
	patchHelper, err := patch.NewHelper(hm, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := patchHelper.Patch(ctx, hm); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if !hm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, hm)
	}
	return r.reconcileNormal(ctx, hm)
}

// waiting sets Ready False with reason and message and asks to be looked at again.
func waiting(hm *infrav1.HostMachine, reason, message string, after time.Duration) (ctrl.Result, error) {
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionReady, false, reason, message)
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *HostMachineReconciler) reconcileNormal(ctx context.Context, hm *infrav1.HostMachine) (ctrl.Result, error) {
	key := infrav1.ClaimKey(hm.Namespace, hm.Name)

	// The owner Machine (Cluster API sets the reference), and its bootstrap data.
	machine, err := util.GetOwnerMachine(ctx, r.Client, hm.ObjectMeta)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	if machine == nil {
		return waiting(hm, infrav1.ReasonWaitingForMachine, "no owner Machine yet", 10*time.Second)
	}

	// The Host: the one already claimed (found by label, so a claim whose status update
	// was lost is not made twice), or a new claim as soon as the Machine exists: the Host
	// prepares (downloads, image imports) while Cluster API makes the bootstrap data.
	host, err := r.ownHost(ctx, hm, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if host == nil {
		req, err := r.claimRequest(ctx, hm, machine)
		if err != nil {
			setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionHostClaimed, false, infrav1.ReasonNoHostAvailable, err.Error())
			return waiting(hm, infrav1.ReasonNoHostAvailable, err.Error(), waitForHostsInterval)
		}
		if host, err = claimHost(ctx, r.Client, r.Reader, req, key, machine.Spec.ClusterName); err != nil {
			return ctrl.Result{}, err
		}
		if host == nil {
			msg := fmt.Sprintf("no registered, unclaimed Host with role %s matches spec.hostSelector", req.role)
			setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionHostClaimed, false, infrav1.ReasonNoHostAvailable, msg)
			return waiting(hm, infrav1.ReasonNoHostAvailable, msg, waitForHostsInterval)
		}
	}
	hm.Status.HostRef = &infrav1.HostReference{Name: host.Name}
	hm.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: host.Name}}
	if host.Spec.Address != "" {
		hm.Status.Addresses = append([]clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: host.Spec.Address}}, hm.Status.Addresses...)
	}
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionHostClaimed, true, infrav1.ReasonClaimed, "host "+host.Name)
	hm.Spec.ProviderID = infrav1.ProviderIDPrefix + host.Name

	// The bootstrap plan, once the prepare plan is Applied and the bootstrap data exists.
	planKey := client.ObjectKey{Namespace: host.Status.PlanNamespace, Name: hm.Name}
	var plan agentv1.NodePlan
	if err := r.Client.Get(ctx, planKey, &plan); apierrors.IsNotFound(err) {
		if done, result, err := r.reconcilePrepare(ctx, hm, host, machine.Spec.ClusterName); err != nil || !done {
			return result, err
		}
		bootstrap, reason, msg, err := bootstrapData(ctx, r.Client, hm, machine)
		if err != nil || reason != "" {
			if err != nil {
				return ctrl.Result{}, err
			}
			// The Machine watch wakes the machine when its bootstrap data arrives; the
			// requeue is for managers without it.
			return waiting(hm, reason, msg, 5*time.Second)
		}
		if format := string(bootstrap.Data["format"]); format != "" && format != "cloud-config" {
			return r.planFailed(hm, infrav1.ReasonBootstrapDataInvalid, fmt.Sprintf("host %s: bootstrap data format %q: only cloud-config is supported", host.Name, format))
		}
		built, err := hostplan.Bootstrap(bootstrap.Data["value"], hostplan.Host{Name: host.Name, Address: host.Spec.Address}, filesSecretName(hm.Name))
		if err != nil {
			return r.planFailed(hm, infrav1.ReasonBootstrapDataInvalid, fmt.Sprintf("host %s: bootstrap data of Machine %s: %v", host.Name, machine.Name, err))
		}
		if err := r.createPlan(ctx, hm, host, machine.Spec.ClusterName, planKey.Name, purposeBootstrap, built.Spec, built.SecretData); err != nil {
			return ctrl.Result{}, err
		}
		hm.Status.BootstrapPlan = &infrav1.PlanReference{Namespace: planKey.Namespace, Name: planKey.Name}
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionBootstrapPlanApplied, false, infrav1.ReasonPlanPending, "plan "+planKey.String()+" created")
		return waiting(hm, infrav1.ReasonPlanPending, fmt.Sprintf("host %s: plan %s created", host.Name, planKey), 0)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	hm.Status.BootstrapPlan = &infrav1.PlanReference{Namespace: planKey.Namespace, Name: planKey.Name}

	switch {
	case plan.Status.ObservedGeneration != plan.Generation:
		return waiting(hm, infrav1.ReasonPlanPending, fmt.Sprintf("host %s: plan %s waits for the agent", host.Name, planKey), 0)
	case plan.Status.Phase == agentv1.PhaseApplied:
		hm.Status.Initialization.Provisioned = ptr.To(true)
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionBootstrapPlanApplied, true, infrav1.ReasonPlanApplied, "plan "+planKey.String()+" Applied")
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionReady, true, infrav1.ReasonReady, "host "+host.Name+" bootstrapped")
		return ctrl.Result{}, nil
	case plan.Status.Phase == agentv1.PhaseFailed || plan.Status.Phase == agentv1.PhaseCancelled:
		return r.planFailed(hm, infrav1.ReasonPlanFailed, failureMessage(host.Name, &plan))
	default:
		msg := fmt.Sprintf("host %s: plan %s %s", host.Name, planKey, plan.Status.Phase)
		if plan.Status.Message != "" {
			msg += ": " + plan.Status.Message
		}
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionBootstrapPlanApplied, false, infrav1.ReasonPlanPending, msg)
		return waiting(hm, infrav1.ReasonPlanPending, msg, 0)
	}
}

// reconcilePrepare writes the Host's prepare plan (the artifacts, spec.prepareCommands)
// and reports whether it is Applied; when not, the result says what to do.
func (r *HostMachineReconciler) reconcilePrepare(ctx context.Context, hm *infrav1.HostMachine, host *agentv1.Host, clusterName string) (bool, ctrl.Result, error) {
	key := client.ObjectKey{Namespace: host.Status.PlanNamespace, Name: hostplan.PrepareName(hm.Name)}
	hm.Status.PreparePlan = &infrav1.PlanReference{Namespace: key.Namespace, Name: key.Name}
	var plan agentv1.NodePlan
	if err := r.Client.Get(ctx, key, &plan); apierrors.IsNotFound(err) {
		artifacts, err := r.artifacts(ctx, hm)
		if err != nil {
			result, err := r.planFailed(hm, infrav1.ReasonBootstrapDataInvalid, fmt.Sprintf("host %s: %v", host.Name, err))
			return false, result, err
		}
		if err := r.createPlan(ctx, hm, host, clusterName, key.Name, purposePrepare, hostplan.Prepare(artifacts, hm.Spec.PrepareCommands), nil); err != nil {
			return false, ctrl.Result{}, err
		}
		msg := fmt.Sprintf("host %s: prepare plan %s created", host.Name, key)
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionPreparePlanApplied, false, infrav1.ReasonPlanPending, msg)
		result, err := waiting(hm, infrav1.ReasonPlanPending, msg, 0)
		return false, result, err
	} else if err != nil {
		return false, ctrl.Result{}, err
	}
	switch {
	case plan.Status.ObservedGeneration == plan.Generation && plan.Status.Phase == agentv1.PhaseApplied:
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionPreparePlanApplied, true, infrav1.ReasonPlanApplied, "plan "+key.String()+" Applied")
		return true, ctrl.Result{}, nil
	case plan.Status.ObservedGeneration == plan.Generation && (plan.Status.Phase == agentv1.PhaseFailed || plan.Status.Phase == agentv1.PhaseCancelled):
		msg := failureMessage(host.Name, &plan)
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionPreparePlanApplied, false, infrav1.ReasonPlanFailed, msg)
		result, err := r.planFailed(hm, infrav1.ReasonPlanFailed, msg)
		return false, result, err
	}
	msg := fmt.Sprintf("host %s: prepare plan %s waits for the agent", host.Name, key)
	if plan.Status.ObservedGeneration == plan.Generation && plan.Status.Phase != "" {
		msg = fmt.Sprintf("host %s: prepare plan %s %s", host.Name, key, plan.Status.Phase)
		if plan.Status.Message != "" {
			msg += ": " + plan.Status.Message
		}
	}
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionPreparePlanApplied, false, infrav1.ReasonPlanPending, msg)
	// The plan's status changes wake the machine through the NodePlan watch.
	result, err := waiting(hm, infrav1.ReasonPlanPending, msg, 0)
	return false, result, err
}

// artifacts are the machine's spec.artifacts and, for every other path, the published
// node artifacts, sorted by path.
func (r *HostMachineReconciler) artifacts(ctx context.Context, hm *infrav1.HostMachine) ([]infrav1.Artifact, error) {
	byPath := map[string]infrav1.Artifact{}
	var cm corev1.ConfigMap
	err := r.Client.Get(ctx, r.ArtifactsConfigMap, &cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	case cm.Data[artifactsKey] != "":
		var published []infrav1.Artifact
		if err := json.Unmarshal([]byte(cm.Data[artifactsKey]), &published); err != nil {
			return nil, fmt.Errorf("ConfigMap %s key %s: %w", r.ArtifactsConfigMap, artifactsKey, err)
		}
		for _, a := range published {
			if !strings.HasPrefix(a.Path, "/") || a.URL == "" || !strings.HasPrefix(a.Digest, "sha256:") {
				return nil, fmt.Errorf("ConfigMap %s key %s: artifact %+v needs an absolute path, a url and a sha256 digest", r.ArtifactsConfigMap, artifactsKey, a)
			}
			byPath[a.Path] = a
		}
	}
	for _, a := range hm.Spec.Artifacts {
		byPath[a.Path] = a
	}
	out := make([]infrav1.Artifact, 0, len(byPath))
	for _, a := range byPath {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// bootstrapData reads the Machine's bootstrap data Secret; a reason and message say what
// is missing when it is not there yet.
func bootstrapData(ctx context.Context, c client.Client, hm *infrav1.HostMachine, machine *clusterv1.Machine) (*corev1.Secret, string, string, error) {
	name := ptr.Deref(machine.Spec.Bootstrap.DataSecretName, "")
	if name == "" {
		return nil, infrav1.ReasonWaitingForBootstrapData, fmt.Sprintf("Machine %s has no bootstrap data yet", machine.Name), nil
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: hm.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, infrav1.ReasonWaitingForBootstrapData, fmt.Sprintf("bootstrap data Secret %s not found yet", name), nil
		}
		return nil, "", "", err
	}
	return &secret, "", "", nil
}

// planFailed sets Ready and BootstrapPlanApplied False with the reason and message. The
// machine stays as it is (no retry of its own): the plan's retries are spent, and Cluster
// API's remediation (or the user) replaces the Machine.
func (r *HostMachineReconciler) planFailed(hm *infrav1.HostMachine, reason, message string) (ctrl.Result, error) {
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionBootstrapPlanApplied, false, reason, message)
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionReady, false, reason, message)
	return ctrl.Result{}, nil
}

// failureMessage names the host, the plan and what failed: the agent's message (which
// names the failed preflight check or instruction) and the failed instruction's output.
func failureMessage(host string, plan *agentv1.NodePlan) string {
	msg := fmt.Sprintf("host %s: plan %s/%s %s: %s", host, plan.Namespace, plan.Name, strings.ToLower(string(plan.Status.Phase)), plan.Status.Message)
	if n := len(plan.Status.Instructions); n > 0 {
		if last := plan.Status.Instructions[n-1]; last.ExitCode != 0 && strings.TrimSpace(last.Output) != "" {
			out := strings.TrimSpace(last.Output)
			if len(out) > 1024 {
				out = "..." + out[len(out)-1024:]
			}
			msg += fmt.Sprintf(" (output of %s: %s)", last.Name, out)
		}
	}
	return msg
}

func filesSecretName(planName string) string { return planName + "-files" }

// createPlan writes the files Secret (when there are files) and the NodePlan, labelled
// for the Host's agent and for this machine.
func (r *HostMachineReconciler) createPlan(ctx context.Context, hm *infrav1.HostMachine, host *agentv1.Host, clusterName, name, purpose string, spec agentv1.NodePlanSpec, files map[string][]byte) error {
	meta := metav1.ObjectMeta{
		Namespace: host.Status.PlanNamespace,
		Name:      name,
		Labels: map[string]string{
			agentv1.HostLabel:        host.Name,
			infrav1.HostMachineLabel: infrav1.ClaimKey(hm.Namespace, hm.Name),
			infrav1.PlanPurposeLabel: purpose,
			infrav1.ClusterNameLabel: clusterName,
		},
		Annotations: map[string]string{hostMachineRefAnnotation: hm.Namespace + "/" + hm.Name},
	}
	if len(files) > 0 {
		secret := &corev1.Secret{ObjectMeta: *meta.DeepCopy(), Data: files, Type: corev1.SecretTypeOpaque}
		secret.Name = filesSecretName(name)
		if err := r.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
			// Left by an attempt that failed before its plan was created: take it over.
			if err := r.Client.Update(ctx, secret); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	plan := &agentv1.NodePlan{ObjectMeta: meta, Spec: spec}
	if err := r.Client.Create(ctx, plan); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create plan %s/%s: %w", meta.Namespace, name, err)
	}
	return nil
}

// ownHost is the Host this machine claimed, if any. Once the claim is in status.hostRef, that
// Host is read from the cache: every reconcile after the claim looks it up, and a live list
// of the Hosts is one more round trip to a loaded API server before the machine's next plan
// (5-380 ms each in a hosts benchmark on 2 cores). A cached Host that does not carry this
// machine's claim (a status written before the cache saw the claim, or a claim released since)
// is looked up live, as before any claim.
func (r *HostMachineReconciler) ownHost(ctx context.Context, hm *infrav1.HostMachine, key string) (*agentv1.Host, error) {
	if ref := hm.Status.HostRef; ref != nil && ref.Name != "" {
		var host agentv1.Host
		err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, &host)
		if err == nil && host.Labels[infrav1.ClaimedByLabel] == key {
			return &host, nil
		}
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	return r.claimedHost(ctx, hm, key)
}

// claimedHost is the Host labelled as claimed by this machine, if any, read live: a claim
// whose status update was lost is found, so it is not made twice.
func (r *HostMachineReconciler) claimedHost(ctx context.Context, hm *infrav1.HostMachine, key string) (*agentv1.Host, error) {
	hosts, err := hostsLabelled(ctx, r.Reader, infrav1.ClaimedByLabel, key)
	if err != nil || len(hosts) == 0 {
		return nil, err
	}
	return &hosts[0], nil
}

// claimRequest: the machine's selector and role, and its cluster's endpoint.
func (r *HostMachineReconciler) claimRequest(ctx context.Context, hm *infrav1.HostMachine, machine *clusterv1.Machine) (claimRequest, error) {
	sel, err := selectorOf(&hm.Spec.HostSelector)
	if err != nil {
		return claimRequest{}, fmt.Errorf("spec.hostSelector: %w", err)
	}
	req := claimRequest{selector: sel, role: infrav1.RoleWorker}
	if _, ok := machine.Labels[infrav1.ControlPlaneMachineLabel]; ok {
		req.role = infrav1.RoleControlPlane
	}
	var cluster clusterv1.Cluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: hm.Namespace, Name: machine.Spec.ClusterName}, &cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return claimRequest{}, fmt.Errorf("the machine's Cluster %s was not found", machine.Spec.ClusterName)
		}
		return claimRequest{}, err
	}
	req.endpointHost = cluster.Spec.ControlPlaneEndpoint.Host
	if ref := cluster.Spec.InfrastructureRef; ref.Name != "" {
		req.clusterKey = infrav1.ClaimKey(cluster.Namespace, ref.Name)
	}
	return req, nil
}

// reconcileDelete resets the Host (when a prepare or bootstrap plan ran on it), releases it, and
// lets the HostMachine go.
func (r *HostMachineReconciler) reconcileDelete(ctx context.Context, hm *infrav1.HostMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(hm, infrav1.HostMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	key := infrav1.ClaimKey(hm.Namespace, hm.Name)
	host, err := r.claimedHost(ctx, hm, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if host != nil {
		released, after, err := r.resetAndRelease(ctx, hm, host)
		if err != nil || !released {
			return ctrl.Result{RequeueAfter: after}, err
		}
	} else if hm.Status.HostRef != nil {
		// The Host is gone (deleted, or released by an earlier pass): its plans, if its
		// namespace still holds them, go with the machine.
		if err := r.deletePlans(ctx, agentv1.PlanNamespace(hm.Status.HostRef.Name), hm.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(hm, infrav1.HostMachineFinalizer)
	return ctrl.Result{}, nil
}

// resetAndRelease runs the reset plan on host and releases it once the plan is Applied,
// or once ResetTimeout has passed since the machine's deletion began. It reports whether
// the Host was released, and when to look again if not.
func (r *HostMachineReconciler) resetAndRelease(ctx context.Context, hm *infrav1.HostMachine, host *agentv1.Host) (bool, time.Duration, error) {
	namespace := host.Status.PlanNamespace
	if namespace == "" {
		namespace = agentv1.PlanNamespace(host.Name)
	}
	ran := false
	for _, name := range []string{hostplan.PrepareName(hm.Name), hm.Name} {
		var plan agentv1.NodePlan
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &plan)
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return false, 0, err
		}
		ran = true
		// A prepare or bootstrap plan still running would hold the host's plan lock for up
		// to its timeout: cancel it, the reset undoes whatever it did.
		if plan.Status.Phase == agentv1.PhaseExecuting || plan.Status.Phase == agentv1.PhasePending || plan.Status.Phase == "" {
			if plan.Annotations[agentv1.CancelAnnotation] != "true" {
				patched := plan.DeepCopy()
				if patched.Annotations == nil {
					patched.Annotations = map[string]string{}
				}
				patched.Annotations[agentv1.CancelAnnotation] = "true"
				if err := r.Client.Patch(ctx, patched, client.MergeFrom(&plan)); err != nil && !apierrors.IsNotFound(err) {
					return false, 0, err
				}
			}
		}
	}
	if !ran {
		// Nothing ran on the Host: there is nothing to reset.
		return true, 0, r.release(ctx, hm, host, namespace, infrav1.ReasonReleased, "host "+host.Name+" released (no prepare or bootstrap plan ran on it)")
	}

	resetName := hm.Name + "-reset"
	var reset agentv1.NodePlan
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: resetName}, &reset); apierrors.IsNotFound(err) {
		if err := r.createPlan(ctx, hm, host, host.Labels[infrav1.ClusterNameLabel], resetName, purposeReset, hostplan.Reset(), nil); err != nil {
			return false, 0, err
		}
	} else if err != nil {
		return false, 0, err
	}
	if reset.Generation != 0 && reset.Status.ObservedGeneration == reset.Generation && reset.Status.Phase == agentv1.PhaseApplied {
		return true, 0, r.release(ctx, hm, host, namespace, infrav1.ReasonReleased, fmt.Sprintf("host %s reset (plan %s/%s Applied) and released", host.Name, namespace, resetName))
	}

	deadline := hm.DeletionTimestamp.Add(r.ResetTimeout)
	state := "not started by the host's agent"
	if reset.Status.Phase != "" {
		state = string(reset.Status.Phase)
		if reset.Status.Message != "" {
			state += ": " + reset.Status.Message
		}
	}
	if left := time.Until(deadline); left > 0 {
		setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionHostReleased, false, infrav1.ReasonResetting,
			fmt.Sprintf("host %s: reset plan %s/%s %s; the host is released anyway at %s", host.Name, namespace, resetName, state, deadline.UTC().Format(time.RFC3339)))
		// Plan status changes wake the machine through the watch; this is the deadline.
		return false, left + time.Second, nil
	}
	msg := fmt.Sprintf("host %s: reset plan %s/%s not Applied within %s (%s); the host is released anyway and may still run what this machine put on it (kubelet, containers, /etc/kubernetes): reset it by hand before it is claimed again",
		host.Name, namespace, resetName, r.ResetTimeout, state)
	if r.Recorder != nil {
		r.Recorder.Eventf(hm, host, corev1.EventTypeWarning, infrav1.ReasonResetTimedOut, "Release", "%s", msg)
	}
	return true, 0, r.release(ctx, hm, host, namespace, infrav1.ReasonResetTimedOut, msg)
}

// release deletes the machine's plans and their Secrets, then removes the claim labels
// from the Host: from then on it is free.
func (r *HostMachineReconciler) release(ctx context.Context, hm *infrav1.HostMachine, host *agentv1.Host, namespace, reason, message string) error {
	if err := r.deletePlans(ctx, namespace, hm.Name); err != nil {
		return err
	}
	if err := removeLabels(ctx, r.Client, host, infrav1.ClaimedByLabel, infrav1.ClusterNameLabel); err != nil {
		return err
	}
	setCondition(&hm.Status.Conditions, hm.Generation, infrav1.ConditionHostReleased, reason == infrav1.ReasonReleased, reason, message)
	return nil
}

func (r *HostMachineReconciler) deletePlans(ctx context.Context, namespace, name string) error {
	objs := []client.Object{}
	for _, n := range []string{hostplan.PrepareName(name), name, name + "-reset"} {
		objs = append(objs,
			&agentv1.NodePlan{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: n}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: filesSecretName(n)}})
	}
	return deleteAll(ctx, r.Client, objs...)
}
