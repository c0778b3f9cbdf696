package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

func planNamespace(t *testing.T, host string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentv1.PlanNamespace(host)}}
	if err := admin.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newPlan(host, name string, spec agentv1.NodePlanSpec) *agentv1.NodePlan {
	return &agentv1.NodePlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(host), Name: name, Labels: map[string]string{agentv1.HostLabel: host}},
		Spec:       spec,
	}
}

func oneInstruction(name string, command string, args ...string) agentv1.NodePlanSpec {
	return agentv1.NodePlanSpec{Instructions: []agentv1.Instruction{{Name: name, Command: command, Args: args}}}
}

func expectRefused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal mentioning %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("refused with %q; want it to mention %q", err, want)
	}
}

func TestWebhookKeepsAnExecutingPlanSpecUnlessForced(t *testing.T) {
	ctx := context.Background()
	planNamespace(t, "wh-host")
	plan := newPlan("wh-host", "running", oneInstruction("one", "true"))
	if err := admin.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	// Before it runs, the spec may change.
	plan.Spec.Instructions[0].Args = []string{"pending-change"}
	if err := admin.Update(ctx, plan); err != nil {
		t.Fatalf("changing a Pending plan: %v", err)
	}

	plan.Status.Phase = agentv1.PhaseExecuting
	plan.Status.Attempts = 1
	if err := admin.Status().Update(ctx, plan); err != nil {
		t.Fatal(err)
	}
	plan.Spec.Instructions[0].Args = []string{"changed"}
	expectRefused(t, admin.Update(ctx, plan), "the plan is Executing")

	// Metadata is not spec: cancelling goes through.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
		t.Fatal(err)
	}
	plan.Annotations = map[string]string{"note": "still allowed"}
	if err := admin.Update(ctx, plan); err != nil {
		t.Fatalf("an annotation on an Executing plan: %v", err)
	}

	plan.Annotations[agentv1.ForceUpdateAnnotation] = "true"
	plan.Spec.Instructions[0].Args = []string{"forced"}
	if err := admin.Update(ctx, plan); err != nil {
		t.Fatalf("a forced change: %v", err)
	}

	// The host label is immutable.
	plan.Labels[agentv1.HostLabel] = "other-host"
	expectRefused(t, admin.Update(ctx, plan), "immutable")
}

func TestWebhookRefusesContentThatDoesNotMatchItsDigest(t *testing.T) {
	ctx := context.Background()
	ns := planNamespace(t, "digest-host")
	content := "key = value\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "content"}, Data: map[string]string{"config": content}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	fileFrom := func(digest string) agentv1.NodePlanSpec {
		return agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{
			Path:       "/tmp/x.conf",
			ContentRef: &agentv1.ContentRef{ConfigMapKeyRef: &agentv1.KeyReference{Name: "content", Key: "config"}, Digest: digest},
		}}}
	}
	wrong := agentv1.Digest([]byte("something else"))
	expectRefused(t, admin.Create(ctx, newPlan("digest-host", "bad-ref", fileFrom(wrong))), "does not match configMapKeyRef content")
	if err := admin.Create(ctx, newPlan("digest-host", "good-ref", fileFrom(agentv1.Digest([]byte(content))))); err != nil {
		t.Fatalf("a matching digest: %v", err)
	}

	inline := agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{Path: "/tmp/y", Content: ptr.To("hello"), Digest: wrong}}}
	expectRefused(t, admin.Create(ctx, newPlan("digest-host", "bad-inline", inline)), "does not match the content")

	// A reference to an object that does not exist yet is admitted with a warning: the
	// agent checks the digest when it writes the file.
	missing := fileFrom(wrong)
	missing.Files[0].ContentRef.ConfigMapKeyRef.Name = "later"
	if err := admin.Create(ctx, newPlan("digest-host", "later-ref", missing)); err != nil {
		t.Fatalf("a reference to a missing object: %v", err)
	}
}

func TestPlanSchemaAndPlacementAreValidatedOnCreate(t *testing.T) {
	ctx := context.Background()
	planNamespace(t, "schema-host")
	both := agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{
		Path: "/tmp/z", Content: ptr.To("x"),
		ContentRef: &agentv1.ContentRef{URL: "https://example.invalid/z", Digest: agentv1.Digest([]byte("x"))},
	}}}
	expectRefused(t, admin.Create(ctx, newPlan("schema-host", "both", both)), "set exactly one of content and contentRef")
	expectRefused(t, admin.Create(ctx, newPlan("schema-host", "empty", agentv1.NodePlanSpec{})), "at least one file, instruction or probe")
	relative := agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{Path: "etc/x", Content: ptr.To("x")}}}
	expectRefused(t, admin.Create(ctx, newPlan("schema-host", "relative", relative)), "spec.files[0].path")
	badMode := agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{Path: "/etc/x", Content: ptr.To("x"), Mode: "0999"}}}
	expectRefused(t, admin.Create(ctx, newPlan("schema-host", "bad-mode", badMode)), "spec.files[0].mode")

	elsewhere := newPlan("schema-host", "elsewhere", oneInstruction("one", "true"))
	elsewhere.Namespace = "default"
	expectRefused(t, admin.Create(ctx, elsewhere), `live in namespace "host-schema-host"`)
	unlabelled := newPlan("schema-host", "unlabelled", oneInstruction("one", "true"))
	unlabelled.Labels = nil
	expectRefused(t, admin.Create(ctx, unlabelled), agentv1.HostLabel)
}
