package agent

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// The plan is read once for a run of writes: each later write starts from what the one
// before returned. A plan changed in between (here its labels) is read again, and no write
// is lost.
func TestStatusWriterReadsThePlanOnlyWhenItChanged(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := agentv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	plan := &agentv1.NodePlan{ObjectMeta: metav1.ObjectMeta{Namespace: "host-a", Name: "bootstrap"}}
	reads := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(plan).WithStatusSubresource(plan).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*agentv1.NodePlan); ok {
				reads++
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	key := types.NamespacedName{Namespace: "host-a", Name: "bootstrap"}
	write := statusWriter(c, c, key)
	step := func(message string) {
		t.Helper()
		if err := write(ctx, func(s *agentv1.NodePlanStatus) { s.Message += message + ";" }); err != nil {
			t.Fatalf("write %q: %v", message, err)
		}
	}

	stored := func() *agentv1.NodePlan {
		t.Helper()
		var plan agentv1.NodePlan
		if err := c.Get(ctx, key, &plan); err != nil {
			t.Fatal(err)
		}
		return &plan
	}

	step("attempt 1")
	step("running check")
	step("running join")
	if reads != 1 {
		t.Errorf("three writes read the plan %d times, want 1", reads)
	}

	// Someone else changes the plan (not its status): the next write conflicts, reads it afresh and lands.
	changed := stored()
	changed.Labels = map[string]string{"changed": "yes"}
	if err := c.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	reads = 0
	step("applied")
	if reads != 1 {
		t.Errorf("the write after a change read the plan %d times, want 1", reads)
	}

	got := stored()
	if want := "attempt 1;running check;running join;applied;"; got.Status.Message != want {
		t.Errorf("status message %q, want %q", got.Status.Message, want)
	}
	if got.Labels["changed"] != "yes" {
		t.Errorf("labels %v: the other writer's change was lost", got.Labels)
	}
}
