package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// TestHostsRegisteringTogetherAreGrantedTogether: the grant of host "slow" holds its Host's
// create until host "fast" exists, so "fast" must be granted while "slow"'s grant is under way.
// With one registration reconciled at a time, "fast" waits behind "slow" and the hold runs out.
func TestHostsRegisteringTogetherAreGrantedTogether(t *testing.T) {
	_, cfg := startEnv(t)
	scheme, admin := agentScheme(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "registration"}}); err != nil {
		t.Fatal(err)
	}

	mgr := testManager(t, cfg, scheme)
	fastCreated := make(chan struct{})
	var heldUntilFast atomic.Bool
	held := &holdingClient{Client: mgr.GetClient(), create: func(ctx context.Context, c client.Client, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*agentv1.Host); ok && obj.GetName() == "slow" {
			select {
			case <-fastCreated:
				heldUntilFast.Store(true)
			case <-time.After(15 * time.Second):
			}
		}
		err := c.Create(ctx, obj, opts...)
		if _, ok := obj.(*agentv1.Host); ok && obj.GetName() == "fast" && err == nil {
			close(fastCreated)
		}
		return err
	}}
	if err := (&HostRegistrationReconciler{Client: held}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	// A Ready token per host, then each host's registration, "slow" first.
	for _, name := range []string{"slow", "fast"} {
		token := &agentv1.RegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "registration", Name: name}}
		if err := admin.Create(ctx, token); err != nil {
			t.Fatal(err)
		}
		token.Status.Phase = agentv1.TokenReady
		if err := admin.Status().Update(ctx, token); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"slow", "fast"} {
		reg := &agentv1.HostRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "registration", Name: name}, Spec: agentv1.HostRegistrationSpec{HostName: name}}
		if err := admin.Create(ctx, reg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	deadline := time.Now().Add(60 * time.Second)
	for _, name := range []string{"slow", "fast"} {
		reg := &agentv1.HostRegistration{}
		for reg.Status.Phase != agentv1.RegistrationGranted {
			if time.Now().After(deadline) {
				t.Fatalf("registration %s not granted within 60 s (phase %q: %s)", name, reg.Status.Phase, reg.Status.Message)
			}
			time.Sleep(100 * time.Millisecond)
			if err := admin.Get(ctx, client.ObjectKey{Namespace: "registration", Name: name}, reg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !heldUntilFast.Load() {
		t.Fatal(`host "fast" was not granted while "slow"'s grant waited: registrations are granted one at a time`)
	}
}

// holdingClient runs create in place of its Client's Create.
type holdingClient struct {
	client.Client
	create func(ctx context.Context, c client.Client, obj client.Object, opts ...client.CreateOption) error
}

func (h *holdingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return h.create(ctx, h.Client, obj, opts...)
}
