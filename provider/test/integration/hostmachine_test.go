package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// These tests run the HostCluster and HostMachine controllers against a real API server
// with Cluster API's Cluster and Machine CRDs. The host's side (the agent executing the
// bootstrap and reset plans) is played by the test writing the plan's status as the agent
// would: the plans run kubeadm, and the reset plan removes /etc/kubernetes and kills
// containerd's containers, which must not happen on the machine running the tests. The
// plans themselves are executed for real on namespace hosts by the hosts e2e test.

const cloudConfig = `## template: jinja
#cloud-config
write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: JoinConfiguration
      nodeRegistration:
        name: '{{ ds.meta_data.hostname }}'
runcmd:
  - "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"
`

// newHost creates a registered Host (its status as the registration grants it) with its
// plan namespace.
func newHost(t *testing.T, name, address string, roles []string, labels map[string]string) *agentv1.Host {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentv1.PlanNamespace(name)}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	h := &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: agentv1.HostSpec{Address: address, Roles: roles}}
	if err := admin.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	// The Host controller adds its finalizer meanwhile: retry on that conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
			return err
		}
		h.Status.PlanNamespace = ns.Name
		apimeta.SetStatusCondition(&h.Status.Conditions, metav1.Condition{Type: agentv1.ConditionRegistered, Status: metav1.ConditionTrue, Reason: "Granted"})
		return admin.Status().Update(ctx, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), h) })
	return h
}

// newNamespace creates a namespace for one test's Cluster API objects.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// newCluster creates a Cluster referencing a HostCluster of the same name.
func newCluster(t *testing.T, ns, name string, endpoint string) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HostCluster", Name: name},
		},
	}
	if endpoint != "" {
		c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: endpoint, Port: 6443}
	}
	if err := admin.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// newMachine creates a Machine with its bootstrap data Secret and a HostMachine it owns,
// as Cluster API's Machine controller and the kubeadm bootstrap provider leave them.
func newMachine(t *testing.T, ns, cluster, name string, controlPlane bool, selector map[string]string) *infrav1.HostMachine {
	t.Helper()
	ctx := context.Background()
	data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap"},
		Data: map[string][]byte{"value": []byte(cloudConfig), "format": []byte("cloud-config")}}
	if err := admin.Create(ctx, data); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(data.Name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HostMachine", Name: name},
		},
	}
	if err := admin.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	hm := &infrav1.HostMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: infrav1.HostMachineSpec{HostSelector: metav1.LabelSelector{MatchLabels: selector}},
	}
	if err := admin.Create(ctx, hm); err != nil {
		t.Fatal(err)
	}
	return hm
}

func getHostMachine(t *testing.T, hm *infrav1.HostMachine) *infrav1.HostMachine {
	t.Helper()
	var got infrav1.HostMachine
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(hm), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func condStr(conds []metav1.Condition, typ string) string {
	c := apimeta.FindStatusCondition(conds, typ)
	if c == nil {
		return typ + ": none"
	}
	return fmt.Sprintf("%s=%s %s: %s", typ, c.Status, c.Reason, c.Message)
}

// waitClaimed waits until hm has a Host and returns its name.
func waitClaimed(t *testing.T, hm *infrav1.HostMachine) string {
	t.Helper()
	var host string
	eventually(t, 20*time.Second, hm.Name+" claims a host", func() (bool, string) {
		got := getHostMachine(t, hm)
		if got.Status.HostRef != nil {
			host = got.Status.HostRef.Name
			return true, ""
		}
		return false, condStr(got.Status.Conditions, infrav1.ConditionReady)
	})
	return host
}

// prepared plays the host's agent for hm's prepare plan: written at claim time, Applied.
func prepared(t *testing.T, host string, hm *infrav1.HostMachine) {
	t.Helper()
	setPlanStatus(t, client.ObjectKey{Namespace: agentv1.PlanNamespace(host), Name: hm.Name + "-prepare"}, agentv1.PhaseApplied, "applied in attempt 1")
}

// setPlanStatus writes a plan's status the way the host's agent does when it ends.
func setPlanStatus(t *testing.T, key client.ObjectKey, phase agentv1.NodePlanPhase, message string, instructions ...agentv1.InstructionStatus) {
	t.Helper()
	var plan agentv1.NodePlan
	eventually(t, 20*time.Second, "plan "+key.String(), func() (bool, string) {
		err := admin.Get(context.Background(), key, &plan)
		return err == nil, fmt.Sprint(err)
	})
	plan.Status.ObservedGeneration = plan.Generation
	plan.Status.Phase = phase
	plan.Status.Message = message
	plan.Status.Instructions = instructions
	if err := admin.Status().Update(context.Background(), &plan); err != nil {
		t.Fatal(err)
	}
}

func TestHostMachinesRaceForOneHost(t *testing.T) {
	ns := newNamespace(t, "race")
	newHost(t, "race-h1", "198.18.0.41", nil, map[string]string{"pool": "race"})
	newCluster(t, ns, "c", "")
	a := newMachine(t, ns, "c", "a", false, map[string]string{"pool": "race"})
	b := newMachine(t, ns, "c", "b", false, map[string]string{"pool": "race"})

	var winner, loser *infrav1.HostMachine
	eventually(t, 20*time.Second, "one of two machines claims the only host", func() (bool, string) {
		ga, gb := getHostMachine(t, a), getHostMachine(t, b)
		switch {
		case ga.Status.HostRef != nil && gb.Status.HostRef != nil:
			t.Fatalf("both machines claimed a host: %s and %s", ga.Status.HostRef.Name, gb.Status.HostRef.Name)
		case ga.Status.HostRef != nil:
			winner, loser = ga, gb
		case gb.Status.HostRef != nil:
			winner, loser = gb, ga
		}
		return winner != nil, "neither claimed"
	})
	// The loser keeps waiting, saying why, and never gets the host.
	eventually(t, 10*time.Second, loser.Name+" says no host is available", func() (bool, string) {
		got := getHostMachine(t, loser)
		c := apimeta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionHostClaimed)
		return c != nil && c.Reason == infrav1.ReasonNoHostAvailable, condStr(got.Status.Conditions, infrav1.ConditionHostClaimed)
	})
	time.Sleep(2 * time.Second)
	if got := getHostMachine(t, loser); got.Status.HostRef != nil {
		t.Fatalf("%s claimed %s too", loser.Name, got.Status.HostRef.Name)
	}
	var h agentv1.Host
	if err := admin.Get(context.Background(), client.ObjectKey{Name: "race-h1"}, &h); err != nil {
		t.Fatal(err)
	}
	if h.Labels[infrav1.ClaimedByLabel] != ns+"."+winner.Name || h.Labels[infrav1.ClusterNameLabel] != "c" {
		t.Errorf("host labels %v, want claimed-by %s.%s and cluster-name c", h.Labels, ns, winner.Name)
	}
	if winner.Spec.ProviderID != "provisioner-host://race-h1" {
		t.Errorf("providerID %q", winner.Spec.ProviderID)
	}
}

func TestHostMachineRoleMatching(t *testing.T) {
	ns := newNamespace(t, "roles")
	newHost(t, "roles-worker", "198.18.0.51", []string{"worker"}, map[string]string{"pool": "roles"})
	newCluster(t, ns, "c", "")
	cp := newMachine(t, ns, "c", "cp", true, map[string]string{"pool": "roles"})
	eventually(t, 20*time.Second, "a control-plane machine refuses a worker-only host", func() (bool, string) {
		got := getHostMachine(t, cp)
		c := apimeta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionHostClaimed)
		return c != nil && c.Reason == infrav1.ReasonNoHostAvailable && strings.Contains(c.Message, "control-plane"), condStr(got.Status.Conditions, infrav1.ConditionHostClaimed)
	})
	newHost(t, "roles-cp", "198.18.0.52", []string{"control-plane"}, map[string]string{"pool": "roles"})
	if host := waitClaimed(t, cp); host != "roles-cp" {
		t.Fatalf("the control-plane machine claimed %s", host)
	}
	w := newMachine(t, ns, "c", "w", false, map[string]string{"pool": "roles"})
	if host := waitClaimed(t, w); host != "roles-worker" {
		t.Fatalf("the worker claimed %s", host)
	}
}

func TestHostMachineProvisionedWhenPlanApplied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "applied")
	// The node artifacts as the hosts platform publishes them.
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "provisioner-agent-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("b", 64)
	artifacts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "provisioner-agent-system", Name: "node-artifacts"},
		Data: map[string]string{"artifacts.json": `[{"path":"/usr/local/bin/kubelet","url":"http://198.18.0.1:8090/node/bin/kubelet","digest":"` + digest + `","mode":"0755"}]`}}
	if err := admin.Create(ctx, artifacts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), artifacts) })
	newHost(t, "applied-h1", "198.18.0.61", nil, map[string]string{"pool": "applied"})
	newCluster(t, ns, "c", "")
	hm := newMachine(t, ns, "c", "m1", false, map[string]string{"pool": "applied"})
	host := waitClaimed(t, hm)
	planKey := client.ObjectKey{Namespace: agentv1.PlanNamespace(host), Name: "m1"}

	// The prepare plan downloads the published artifacts.
	var prepare agentv1.NodePlan
	eventually(t, 20*time.Second, "prepare plan", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: planKey.Namespace, Name: "m1-prepare"}, &prepare)
		return err == nil, fmt.Sprint(err)
	})
	if prepare.Labels[agentv1.HostLabel] != host || prepare.Labels[infrav1.PlanPurposeLabel] != "prepare" || len(prepare.Spec.PreflightChecks) == 0 {
		t.Fatalf("prepare plan: labels %v, %d preflight checks", prepare.Labels, len(prepare.Spec.PreflightChecks))
	}
	if f := prepare.Spec.Files[0]; f.Path != "/usr/local/bin/kubelet" || f.ContentRef == nil || f.ContentRef.URL != "http://198.18.0.1:8090/node/bin/kubelet" || f.ContentRef.Digest != digest || f.Mode != "0755" {
		t.Errorf("first file is not the published kubelet: %+v", f)
	}
	prepared(t, host, hm)

	// The bootstrap plan: labelled for the host's agent, files from a Secret, jinja rendered.
	var plan agentv1.NodePlan
	eventually(t, 20*time.Second, "bootstrap plan", func() (bool, string) {
		err := admin.Get(ctx, planKey, &plan)
		return err == nil, fmt.Sprint(err)
	})
	if plan.Labels[agentv1.HostLabel] != host || plan.Labels[infrav1.PlanPurposeLabel] != "bootstrap" || len(plan.Spec.PreflightChecks) == 0 {
		t.Fatalf("plan: labels %v, %d preflight checks", plan.Labels, len(plan.Spec.PreflightChecks))
	}
	ref := plan.Spec.Files[0].ContentRef.SecretKeyRef
	var files corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: planKey.Namespace, Name: ref.Name}, &files); err != nil {
		t.Fatal(err)
	}
	if got := string(files.Data[ref.Key]); !strings.Contains(got, "name: 'applied-h1'") {
		t.Errorf("join config as written: %s", got)
	}
	if got := getHostMachine(t, hm); ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Fatal("provisioned before the plan is Applied")
	}

	setPlanStatus(t, planKey, agentv1.PhaseApplied, "applied in attempt 1")
	eventually(t, 20*time.Second, "provisioned", func() (bool, string) {
		got := getHostMachine(t, hm)
		return ptr.Deref(got.Status.Initialization.Provisioned, false), condStr(got.Status.Conditions, infrav1.ConditionReady)
	})
	got := getHostMachine(t, hm)
	if got.Spec.ProviderID != "provisioner-host://applied-h1" {
		t.Errorf("providerID %q", got.Spec.ProviderID)
	}
	if len(got.Status.Addresses) != 2 || got.Status.Addresses[0].Type != clusterv1.MachineInternalIP || got.Status.Addresses[0].Address != "198.18.0.61" {
		t.Errorf("addresses %+v", got.Status.Addresses)
	}
	if !apimeta.IsStatusConditionTrue(got.Status.Conditions, infrav1.ConditionReady) {
		t.Errorf("%s", condStr(got.Status.Conditions, infrav1.ConditionReady))
	}
}

// The Host is claimed and its prepare plan (downloads, prepareCommands) written as soon as
// the Machine exists, before the kubeadm bootstrap provider has made the bootstrap data (a
// worker's waits for the control plane to be initialized); the bootstrap plan is written
// the moment the Machine gets its bootstrap data (the Machine watch, not the 5 s requeue).
func TestHostMachinePreparesBeforeBootstrapDataExists(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "bootstrapwatch")
	newHost(t, "bootstrapwatch-h1", "198.18.0.62", nil, map[string]string{"pool": "bootstrapwatch"})
	newCluster(t, ns, "c", "")
	// As the Machine controller leaves them before the bootstrap provider is done: no data yet.
	m := clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c",
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: "m1"}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HostMachine", Name: "m1"},
		},
	}
	if err := admin.Create(ctx, &m); err != nil {
		t.Fatal(err)
	}
	importImages := `for f in /var/lib/provisioner/images/*.tar; do ctr -n k8s.io images import "$f" || exit 1; done`
	hm := &infrav1.HostMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}}},
		Spec: infrav1.HostMachineSpec{
			HostSelector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "bootstrapwatch"}},
			PrepareCommands: []string{importImages},
		},
	}
	if err := admin.Create(ctx, hm); err != nil {
		t.Fatal(err)
	}

	// Claimed, and the prepare plan written, with no bootstrap data anywhere.
	host := waitClaimed(t, hm)
	planNS := agentv1.PlanNamespace(host)
	var prepare agentv1.NodePlan
	eventually(t, 20*time.Second, "prepare plan", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: planNS, Name: "m1-prepare"}, &prepare)
		return err == nil, fmt.Sprint(err)
	})
	if err := admin.Get(ctx, client.ObjectKeyFromObject(&m), &m); err != nil || m.Spec.Bootstrap.DataSecretName != nil {
		t.Fatalf("the Machine has bootstrap data (%v): the test proves nothing", err)
	}
	if last := prepare.Spec.Instructions[len(prepare.Spec.Instructions)-1]; last.Command != "/bin/sh" || last.Args[1] != importImages {
		t.Errorf("the prepare plan's last instruction is not the prepare command: %+v", last)
	}
	if prepare.Labels[infrav1.PlanPurposeLabel] != "prepare" || prepare.Labels[agentv1.HostLabel] != host {
		t.Errorf("prepare plan labels %v", prepare.Labels)
	}
	got := getHostMachine(t, hm)
	if got.Status.PreparePlan == nil || got.Status.PreparePlan.Name != "m1-prepare" {
		t.Errorf("status.preparePlan %+v", got.Status.PreparePlan)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: planNS, Name: "m1"}, &agentv1.NodePlan{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a bootstrap plan before the bootstrap data: %v", err)
	}

	// Prepared; still waiting for the bootstrap data, and saying so.
	prepared(t, host, hm)
	eventually(t, 20*time.Second, "waiting for bootstrap data", func() (bool, string) {
		got := getHostMachine(t, hm)
		c := apimeta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonWaitingForBootstrapData && apimeta.IsStatusConditionTrue(got.Status.Conditions, infrav1.ConditionPreparePlanApplied),
			condStr(got.Status.Conditions, infrav1.ConditionReady) + "; " + condStr(got.Status.Conditions, infrav1.ConditionPreparePlanApplied)
	})

	data := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1-bootstrap"},
		Data: map[string][]byte{"value": []byte(cloudConfig), "format": []byte("cloud-config")}}
	if err := admin.Create(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m1"}, &m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Bootstrap.DataSecretName = ptr.To(data.Name)
	if err := admin.Update(ctx, &m); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	planKey := client.ObjectKey{Namespace: planNS, Name: "m1"}
	eventually(t, 20*time.Second, "bootstrap plan", func() (bool, string) {
		var plan agentv1.NodePlan
		err := admin.Get(ctx, planKey, &plan)
		return err == nil, fmt.Sprint(err)
	})
	// Under a second on a quiet machine; the requeue alone would take up to 5 s.
	if took := time.Since(set); took > 2500*time.Millisecond {
		t.Errorf("plan written %s after the Machine got its bootstrap data: not woken by the Machine's update", took)
	} else {
		t.Logf("plan written %s after the Machine got its bootstrap data", took)
	}
}

func TestHostMachineFailedPlanNamesHostAndCheck(t *testing.T) {
	ns := newNamespace(t, "failed")
	newHost(t, "failed-h1", "198.18.0.71", nil, map[string]string{"pool": "failed"})
	newCluster(t, ns, "c", "")
	hm := newMachine(t, ns, "c", "m1", false, map[string]string{"pool": "failed"})
	host := waitClaimed(t, hm)
	// The prerequisites are the prepare plan's checks: a missing one fails it, and no bootstrap plan is written.
	setPlanStatus(t, client.ObjectKey{Namespace: agentv1.PlanNamespace(host), Name: "m1-prepare"}, agentv1.PhaseFailed,
		"attempt 3 of 3 failed: required preflight check failed: containerd-socket: stat /run/containerd/containerd.sock: no such file or directory")
	eventually(t, 20*time.Second, "PlanFailed", func() (bool, string) {
		got := getHostMachine(t, hm)
		c := apimeta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonPlanFailed && c.Status == metav1.ConditionFalse &&
			strings.Contains(c.Message, "host failed-h1") && strings.Contains(c.Message, "m1-prepare") && strings.Contains(c.Message, "containerd-socket"), condStr(got.Status.Conditions, infrav1.ConditionReady)
	})
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: agentv1.PlanNamespace(host), Name: "m1"}, &agentv1.NodePlan{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a bootstrap plan after a failed prepare plan: %v", err)
	}
}

func TestHostMachineDeleteResetsAndReleases(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "reset")
	newHost(t, "reset-h1", "198.18.0.81", nil, map[string]string{"pool": "reset"})
	newCluster(t, ns, "c", "")
	hm := newMachine(t, ns, "c", "m1", false, map[string]string{"pool": "reset"})
	host := waitClaimed(t, hm)
	planNS := agentv1.PlanNamespace(host)
	prepared(t, host, hm)
	setPlanStatus(t, client.ObjectKey{Namespace: planNS, Name: "m1"}, agentv1.PhaseApplied, "applied")

	if err := admin.Delete(ctx, hm); err != nil {
		t.Fatal(err)
	}
	// The reset plan, kubelet's supervisor stopped first; the host stays claimed meanwhile.
	var reset agentv1.NodePlan
	eventually(t, 20*time.Second, "reset plan", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: planNS, Name: "m1-reset"}, &reset)
		return err == nil, fmt.Sprint(err)
	})
	if ins := reset.Spec.Instructions[0]; ins.Name != "stop-kubelet" || !strings.Contains(strings.Join(ins.Args, " "), "supervise stop --name kubelet") {
		t.Errorf("first reset instruction %+v", ins)
	}
	var h agentv1.Host
	if err := admin.Get(ctx, client.ObjectKey{Name: host}, &h); err != nil || h.Labels[infrav1.ClaimedByLabel] == "" {
		t.Fatalf("host released before its reset: %v %v", h.Labels, err)
	}
	setPlanStatus(t, client.ObjectKey{Namespace: planNS, Name: "m1-reset"}, agentv1.PhaseApplied, "applied")

	eventually(t, 20*time.Second, "HostMachine gone", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(hm), &infrav1.HostMachine{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := admin.Get(ctx, client.ObjectKey{Name: host}, &h); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Labels[infrav1.ClaimedByLabel]; ok {
		t.Errorf("host still claimed: %v", h.Labels)
	}
	if _, ok := h.Labels[infrav1.ClusterNameLabel]; ok {
		t.Errorf("host still labelled with the cluster: %v", h.Labels)
	}
	var plans agentv1.NodePlanList
	if err := admin.List(ctx, &plans, client.InNamespace(planNS)); err != nil || len(plans.Items) != 0 {
		t.Errorf("plans left on the host: %d (%v)", len(plans.Items), err)
	}
	var secrets corev1.SecretList
	if err := admin.List(ctx, &secrets, client.InNamespace(planNS), client.HasLabels{infrav1.HostMachineLabel}); err != nil || len(secrets.Items) != 0 {
		t.Errorf("files Secrets left on the host: %d (%v)", len(secrets.Items), err)
	}

	// The host is free again: a new machine claims it.
	again := newMachine(t, ns, "c", "m2", false, map[string]string{"pool": "reset"})
	if got := waitClaimed(t, again); got != host {
		t.Errorf("the released host was not claimed again (got %s)", got)
	}
}

func TestHostMachineDeleteReleasesAfterTimeoutWhenTheAgentIsGone(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "gone")
	newHost(t, "gone-h1", "198.18.0.91", nil, map[string]string{"pool": "gone"})
	newCluster(t, ns, "c", "")
	hm := newMachine(t, ns, "c", "m1", false, map[string]string{"pool": "gone"})
	host := waitClaimed(t, hm)
	prepared(t, host, hm)
	setPlanStatus(t, client.ObjectKey{Namespace: agentv1.PlanNamespace(host), Name: "m1"}, agentv1.PhaseApplied, "applied")

	start := time.Now()
	if err := admin.Delete(ctx, hm); err != nil {
		t.Fatal(err)
	}
	// No agent runs the reset plan: the machine goes after the reset timeout, not before.
	eventually(t, 10*time.Second, "Resetting", func() (bool, string) {
		got := getHostMachine(t, hm)
		c := apimeta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionHostReleased)
		return c != nil && c.Reason == infrav1.ReasonResetting, condStr(got.Status.Conditions, infrav1.ConditionHostReleased)
	})
	eventually(t, testResetTimeout+20*time.Second, "HostMachine gone", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(hm), &infrav1.HostMachine{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if waited := time.Since(start); waited < testResetTimeout-2*time.Second {
		t.Errorf("released after %s, before the %s reset timeout", waited, testResetTimeout)
	}
	var h agentv1.Host
	if err := admin.Get(ctx, client.ObjectKey{Name: host}, &h); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Labels[infrav1.ClaimedByLabel]; ok {
		t.Errorf("host still claimed: %v", h.Labels)
	}
	// The forced release is a Warning event naming the host.
	eventually(t, 10*time.Second, "Warning event", func() (bool, string) {
		var evs corev1.EventList
		if err := admin.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == infrav1.ReasonResetTimedOut && strings.Contains(e.Message, "host gone-h1") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
}

func TestHostClusterTakesEndpointFromAFreeControlPlaneHost(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "endpoint")
	newHost(t, "endpoint-b", "198.18.0.102", []string{"control-plane"}, map[string]string{"pool": "endpoint"})
	newHost(t, "endpoint-a-worker", "198.18.0.101", []string{"worker"}, map[string]string{"pool": "endpoint"})
	newHost(t, "endpoint-c", "198.18.0.103", nil, map[string]string{"pool": "endpoint"})
	hc := &infrav1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec: infrav1.HostClusterSpec{ControlPlaneHostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "endpoint"}}}}
	if err := admin.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "HostCluster provisioned", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(hc), hc); err != nil {
			return false, err.Error()
		}
		return ptr.Deref(hc.Status.Initialization.Provisioned, false), condStr(hc.Status.Conditions, infrav1.ConditionReady)
	})
	// The first control-plane host by name (the worker-only one is skipped), port 6443.
	if e := hc.Spec.ControlPlaneEndpoint; e.Host != "198.18.0.102" || e.Port != 6443 || hc.Status.EndpointHost != "endpoint-b" {
		t.Fatalf("endpoint %+v from %q", e, hc.Status.EndpointHost)
	}
	var h agentv1.Host
	if err := admin.Get(ctx, client.ObjectKey{Name: "endpoint-b"}, &h); err != nil || h.Labels[infrav1.EndpointOfLabel] != ns+".c" {
		t.Fatalf("reservation %v %v", h.Labels, err)
	}
	// The endpoint is immutable once set.
	hc.Spec.ControlPlaneEndpoint.Host = "198.18.0.103"
	if err := admin.Update(ctx, hc); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing the endpoint: %v", err)
	}

	// A worker of the cluster does not take the reserved host; its control plane does.
	newCluster(t, ns, "c", "198.18.0.102")
	w := newMachine(t, ns, "c", "w", false, map[string]string{"pool": "endpoint"})
	if host := waitClaimed(t, w); host == "endpoint-b" {
		t.Fatal("a worker claimed the endpoint's host")
	}
	cp := newMachine(t, ns, "c", "cp", true, map[string]string{"pool": "endpoint"})
	if host := waitClaimed(t, cp); host != "endpoint-b" {
		t.Fatalf("the control plane claimed %s, not the endpoint's host", host)
	}

	// Deleting the HostCluster lifts the reservation.
	if err := admin.Delete(ctx, &infrav1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "reservation lifted", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKey{Name: "endpoint-b"}, &h); err != nil {
			return false, err.Error()
		}
		_, reserved := h.Labels[infrav1.EndpointOfLabel]
		return !reserved, fmt.Sprint(h.Labels)
	})
}

func TestHostMachineTemplateSpecIsImmutable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "templates")
	tpl := &infrav1.HostMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"},
		Spec: infrav1.HostMachineTemplateSpec{Template: infrav1.HostMachineTemplateResource{Spec: infrav1.HostMachineSpec{
			HostSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}}}}}
	if err := admin.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.Template.Spec.HostSelector.MatchLabels["pool"] = "b"
	if err := admin.Update(ctx, tpl); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing the template's spec: %v", err)
	}
	bad := &infrav1.HostMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: infrav1.HostMachineSpec{HostSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}}}
	if err := admin.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "hostSelector") {
		t.Errorf("an invalid hostSelector: %v", err)
	}
}

func TestHostClusterTemplateSpecIsValidAndImmutable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "cluster-templates")
	bad := &infrav1.HostClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: infrav1.HostClusterTemplateSpec{Template: infrav1.HostClusterTemplateResource{Spec: infrav1.HostClusterSpec{
			ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "198.18.0.10"}}}}}
	if err := admin.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.template.spec.controlPlaneEndpoint") {
		t.Errorf("an endpoint without a port: %v", err)
	}
	tpl := &infrav1.HostClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"},
		Spec: infrav1.HostClusterTemplateSpec{Template: infrav1.HostClusterTemplateResource{Spec: infrav1.HostClusterSpec{
			ControlPlaneHostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}}}}}
	if err := admin.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Spec.Template.Spec.ControlPlaneHostSelector.MatchLabels["pool"] = "b"
	if err := admin.Update(ctx, tpl); err == nil || !strings.Contains(err.Error(), "spec.template.spec: Forbidden: is immutable") {
		t.Errorf("changing the template's spec: %v", err)
	}
}

// A HostMachine of a paused Cluster, or one carrying Cluster API's paused annotation, is
// left as it is (no finalizer, no claim), as clusterctl move and the pivot need; lifting
// the pause lets it claim its Host.
func TestHostMachineHonoursPause(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "paused")
	newHost(t, "paused-h1", "198.18.0.61", nil, map[string]string{"pool": "paused"})
	cluster := newCluster(t, ns, "c", "")
	cluster.Spec.Paused = ptr.To(true)
	if err := admin.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	hm := newMachine(t, ns, "c", "m", false, map[string]string{"pool": "paused"})
	time.Sleep(3 * time.Second)
	got := getHostMachine(t, hm)
	if len(got.Finalizers) > 0 || got.Status.HostRef != nil {
		t.Fatalf("a machine of a paused Cluster was reconciled: finalizers %v, host %v", got.Finalizers, got.Status.HostRef)
	}

	// The annotation alone holds it too.
	got.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	if err := admin.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		t.Fatal(err)
	}
	cluster.Spec.Paused = nil
	if err := admin.Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	got = getHostMachine(t, hm)
	if len(got.Finalizers) > 0 || got.Status.HostRef != nil {
		t.Fatalf("a machine with the paused annotation was reconciled: finalizers %v, host %v", got.Finalizers, got.Status.HostRef)
	}

	delete(got.Annotations, clusterv1.PausedAnnotation)
	if err := admin.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if host := waitClaimed(t, hm); host != "paused-h1" {
		t.Fatalf("the unpaused machine claimed %s", host)
	}
}
