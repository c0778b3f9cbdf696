package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// minTokenRequestSeconds is the shortest token the API server issues. A shorter TTL is
// enforced by the manager: at expiry it deletes the import ServiceAccount, which
// revokes the token.
const minTokenRequestSeconds = 600

// RegistrationTokenReconciler issues a RegistrationToken's import credential (a
// ServiceAccount, its Role and binding, a bound token in a Secret) and revokes it when
// the TTL passes.
type RegistrationTokenReconciler struct {
	Client client.Client
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

func (r *RegistrationTokenReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return completeEager(mgr, "registrationtoken", &agentv1.RegistrationToken{}, r)
}

func (r *RegistrationTokenReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *RegistrationTokenReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var token agentv1.RegistrationToken
	if err := r.Client.Get(ctx, req.NamespacedName, &token); err != nil {
		if apierrors.IsNotFound(err) {
			// A deleted token takes its credential with it.
			return ctrl.Result{}, deleteAll(ctx, r.Client, importObjects(req.Namespace, req.Name)...)
		}
		return ctrl.Result{}, err
	}

	switch token.Status.Phase {
	case "", agentv1.TokenPending:
		if err := r.issue(ctx, &token); err != nil {
			return ctrl.Result{}, err
		}
	case agentv1.TokenExpired:
		return ctrl.Result{}, nil
	}

	if left := token.Status.ExpiresAt.Sub(r.now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return ctrl.Result{}, r.expire(ctx, &token)
}

func (r *RegistrationTokenReconciler) issue(ctx context.Context, token *agentv1.RegistrationToken) error {
	ttl := time.Hour
	if token.Spec.TTL != nil {
		ttl = token.Spec.TTL.Duration
	}
	expiresAt := token.CreationTimestamp.Add(ttl)

	sa, err := ensureServiceAccount(ctx, r.Client, token.Namespace, token.Name)
	if err != nil {
		return fmt.Errorf("import serviceaccount: %w", err)
	}
	if err := ensureRole(ctx, r.Client, token.Namespace, token.Name, importRules(token.Name, true), sa); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: token.Namespace, Name: agentv1.TokenSecretName(token.Name)}}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	if apierrors.IsNotFound(err) {
		seconds := max(int64(time.Until(expiresAt).Seconds())+1, minTokenRequestSeconds)
		tr, err := requestToken(ctx, r.Client, sa, seconds)
		if err != nil {
			return err
		}
		secret.Labels = managedLabels(nil)
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{"token": []byte(tr.Status.Token)}
		if err := controllerutil.SetOwnerReference(token, secret, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, secret); err != nil {
			return fmt.Errorf("import token secret: %w", err)
		}
	} else if err != nil {
		return err
	}

	token.Status.Phase = agentv1.TokenReady
	token.Status.SecretName = secret.Name
	token.Status.ExpiresAt = &metav1.Time{Time: expiresAt}
	return r.Client.Status().Update(ctx, token)
}

// expire revokes the import credential (deleting the ServiceAccount invalidates its
// token), and any copy of a granted credential its agent never came back for.
func (r *RegistrationTokenReconciler) expire(ctx context.Context, token *agentv1.RegistrationToken) error {
	credential := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: token.Namespace, Name: agentv1.CredentialSecretName(token.Name)}}
	if err := deleteAll(ctx, r.Client, append(importObjects(token.Namespace, token.Name), credential)...); err != nil {
		return err
	}
	if token.Status.Phase != agentv1.TokenUsed {
		token.Status.Phase = agentv1.TokenExpired
		return r.Client.Status().Update(ctx, token)
	}
	return nil
}
