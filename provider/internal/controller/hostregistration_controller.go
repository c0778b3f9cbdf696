package controller

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// HostRegistrationReconciler grants a HostRegistration: it spends the token, creates
// the Host, the host's plan namespace, its agent's ServiceAccount and RBAC, and a
// credential Secret the agent reads back with its import token. When the agent deletes
// its registration (it has saved the credential), the import credential and the
// credential Secret are deleted.
type HostRegistrationReconciler struct {
	Client client.Client
	// AgentTokenTTL is how long a granted agent token lives; the agent renews it when a
	// third is left. Default: 720h.
	AgentTokenTTL time.Duration
}

func (r *HostRegistrationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return completeEager(mgr, "hostregistration", &agentv1.HostRegistration{}, r)
}

func (r *HostRegistrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var reg agentv1.HostRegistration
	if err := r.Client.Get(ctx, req.NamespacedName, &reg); err != nil {
		if apierrors.IsNotFound(err) {
			credential := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: agentv1.CredentialSecretName(req.Name)}}
			return ctrl.Result{}, deleteAll(ctx, r.Client, append(importObjects(req.Namespace, req.Name), credential)...)
		}
		return ctrl.Result{}, err
	}
	if reg.Status.Phase == agentv1.RegistrationGranted || reg.Status.Phase == agentv1.RegistrationDenied {
		return ctrl.Result{}, nil
	}

	var token agentv1.RegistrationToken
	if err := r.Client.Get(ctx, req.NamespacedName, &token); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deny(ctx, &reg, "its RegistrationToken no longer exists")
		}
		return ctrl.Result{}, err
	}
	if token.Spec.HostName != "" && token.Spec.HostName != reg.Spec.HostName {
		return ctrl.Result{}, r.deny(ctx, &reg, fmt.Sprintf("the registration token is for host %q only", token.Spec.HostName))
	}
	switch token.Status.Phase {
	case agentv1.TokenReady:
	case agentv1.TokenUsed:
		if token.Status.Host != reg.Spec.HostName {
			return ctrl.Result{}, r.deny(ctx, &reg, "the registration token was already used")
		}
		// Used by this very registration: an earlier grant stopped half way.
	default:
		return ctrl.Result{}, r.deny(ctx, &reg, fmt.Sprintf("the registration token is %s", token.Status.Phase))
	}

	var existing agentv1.Host
	err := r.Client.Get(ctx, client.ObjectKey{Name: reg.Spec.HostName}, &existing)
	// A token made for this very host re-registers an existing Host (one moved here by a
	// pivot: its agent follows with a fresh credential from this manager).
	reregister := err == nil && existing.Status.Registration != reg.Name && token.Spec.HostName == reg.Spec.HostName
	switch {
	case err == nil && existing.Status.Registration != reg.Name && !reregister:
		return ctrl.Result{}, r.deny(ctx, &reg, fmt.Sprintf("host %q is already registered; delete that Host to register it again", reg.Spec.HostName))
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}

	// Spend the token first: whatever happens next, it registers nothing else.
	if token.Status.Phase != agentv1.TokenUsed {
		token.Status.Phase = agentv1.TokenUsed
		token.Status.Host = reg.Spec.HostName
		if err := r.Client.Status().Update(ctx, &token); err != nil {
			return ctrl.Result{}, err
		}
	}
	importSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: reg.Namespace, Name: reg.Name}}
	if err := ensureRole(ctx, r.Client, reg.Namespace, reg.Name, importRules(reg.Name, false), importSA); err != nil {
		return ctrl.Result{}, err
	}

	if reregister {
		// Whatever credential this manager issued for the host before is revoked first:
		// deleting the ServiceAccount invalidates every token it had. Once the grant is
		// recorded (status.registration = this registration) this is not done again.
		agent := metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(reg.Spec.HostName), Name: agentv1.AgentServiceAccount}
		if err := deleteAll(ctx, r.Client, &corev1.ServiceAccount{ObjectMeta: agent}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.grant(ctx, &reg); err != nil {
		if apierrors.IsInvalid(err) {
			// The registration asked for something no retry fixes (a label the API
			// server refuses): say so instead of retrying forever.
			return ctrl.Result{}, r.deny(ctx, &reg, err.Error())
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func (r *HostRegistrationReconciler) grant(ctx context.Context, reg *agentv1.HostRegistration) error {
	hostName := reg.Spec.HostName
	namespace := agentv1.PlanNamespace(hostName)

	// The grant is some twenty requests, each a round trip to an API server that is busy
	// starting a cluster; the host's agent waits for the last. Those that need nothing of each
	// other go together: first the namespaces, the Host and the cluster-scoped RBAC (a binding
	// names its ServiceAccount, which need not exist yet), then what lives in the namespaces.
	var host *agentv1.Host
	first, ctx1 := errgroup.WithContext(ctx)
	first.Go(func() error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: managedLabels(map[string]string{agentv1.HostLabel: hostName})}}
		if err := r.Client.Create(ctx1, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("plan namespace %s: %w", namespace, err)
		}
		return nil
	})
	first.Go(func() error {
		var err error
		host, err = r.ensureHost(ctx1, reg)
		return err
	})
	first.Go(func() error {
		artifactsNs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentv1.NodeArtifactsNamespace}}
		if err := r.Client.Create(ctx1, artifactsNs); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", agentv1.NodeArtifactsNamespace, err)
		}
		return nil
	})
	agentSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentv1.AgentServiceAccount}}
	first.Go(func() error {
		return ensureClusterRole(ctx1, r.Client, agentv1.HostClusterRoleName(hostName), hostRules(hostName), agentSA)
	})
	if err := first.Wait(); err != nil {
		return err
	}

	var sa *corev1.ServiceAccount
	second, ctx2 := errgroup.WithContext(ctx)
	second.Go(func() error {
		var err error
		if sa, err = ensureServiceAccount(ctx2, r.Client, namespace, agentv1.AgentServiceAccount); err != nil {
			return fmt.Errorf("agent serviceaccount: %w", err)
		}
		return nil
	})
	second.Go(func() error {
		return ensureRole(ctx2, r.Client, namespace, agentv1.AgentServiceAccount, agentRules(), agentSA)
	})
	second.Go(func() error {
		return ensureRole(ctx2, r.Client, agentv1.NodeArtifactsNamespace, agentv1.NodeArtifactsRoleName(hostName), nodeArtifactsRules(), agentSA)
	})
	if err := second.Wait(); err != nil {
		return err
	}

	ttl := r.AgentTokenTTL
	if ttl == 0 {
		ttl = 720 * time.Hour
	}
	tr, err := requestToken(ctx, r.Client, sa, int64(ttl.Seconds()))
	if err != nil {
		return err
	}
	credential := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: reg.Namespace, Name: agentv1.CredentialSecretName(reg.Name), Labels: managedLabels(nil)},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"token":          []byte(tr.Status.Token),
			"host":           []byte(hostName),
			"namespace":      []byte(namespace),
			"serviceAccount": []byte(sa.Name),
		},
	}
	if err := r.Client.Create(ctx, credential); apierrors.IsAlreadyExists(err) {
		if err := r.Client.Update(ctx, credential); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("credential secret: %w", err)
	}

	now := metav1.Now()
	if host.Status.Registration != reg.Name {
		// A heartbeat from before (a moved Host's, copied from the old manager) is not
		// this credential's: the next one proves the agent uses it.
		host.Status.LastHeartbeatTime = nil
	}
	host.Status.PlanNamespace = namespace
	host.Status.ServiceAccount = sa.Name
	host.Status.Registration = reg.Name
	host.Status.RegisteredTime = &now
	meta.SetStatusCondition(&host.Status.Conditions, metav1.Condition{
		Type: agentv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Granted",
		Message: fmt.Sprintf("registered by %s/%s", reg.Namespace, reg.Name), ObservedGeneration: host.Generation,
	})
	if err := r.Client.Status().Update(ctx, host); err != nil {
		return fmt.Errorf("host %s status: %w", hostName, err)
	}

	reg.Status.Phase = agentv1.RegistrationGranted
	reg.Status.CredentialSecretName = credential.Name
	reg.Status.Message = ""
	return r.Client.Status().Update(ctx, reg)
}

// ensureHost is the registration's Host: the one of that name, or a new one with the
// registration's labels, address and roles.
func (r *HostRegistrationReconciler) ensureHost(ctx context.Context, reg *agentv1.HostRegistration) (*agentv1.Host, error) {
	host := &agentv1.Host{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: reg.Spec.HostName}, host); apierrors.IsNotFound(err) {
		host = &agentv1.Host{
			ObjectMeta: metav1.ObjectMeta{Name: reg.Spec.HostName, Labels: reg.Spec.Labels, Finalizers: []string{agentv1.HostFinalizer}},
			Spec:       agentv1.HostSpec{Address: reg.Spec.Address, Roles: reg.Spec.Roles},
		}
		if err := r.Client.Create(ctx, host); err != nil {
			return nil, fmt.Errorf("create host %s: %w", reg.Spec.HostName, err)
		}
	} else if err != nil {
		return nil, err
	}
	return host, nil
}

func (r *HostRegistrationReconciler) deny(ctx context.Context, reg *agentv1.HostRegistration, why string) error {
	reg.Status.Phase = agentv1.RegistrationDenied
	reg.Status.Message = why
	return r.Client.Status().Update(ctx, reg)
}
