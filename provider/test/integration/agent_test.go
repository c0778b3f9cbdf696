package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/agent"
)

// node is a registered host with a running agent.
type node struct {
	host     string
	dataDir  string
	lockFile string
	agent    *agentProcess
}

func startNode(t *testing.T, host string) *node {
	t.Helper()
	n := &node{host: host, dataDir: registerHost(t, host), lockFile: filepath.Join(t.TempDir(), "plan.lock")}
	n.agent = startAgent(t, n.dataDir, n.lockFile)
	return n
}

func (n *node) apply(t *testing.T, name string, spec agentv1.NodePlanSpec) *agentv1.NodePlan {
	t.Helper()
	plan := newPlan(n.host, name, spec)
	if err := admin.Create(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// waitPhase waits until the plan's observed generation ends in phase, and returns it.
func waitPhase(t *testing.T, plan *agentv1.NodePlan, phase agentv1.NodePlanPhase, timeout time.Duration) *agentv1.NodePlan {
	t.Helper()
	got := &agentv1.NodePlan{}
	eventually(t, timeout, fmt.Sprintf("plan %s %s", plan.Name, phase), func() (bool, string) {
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(plan), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == phase && got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("phase %s: %s", got.Status.Phase, got.Status.Message)
	})
	return got
}

func condition(plan *agentv1.NodePlan, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(plan.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestAgentWritesFilesAndKeepsInstructionOutput(t *testing.T) {
	n := startNode(t, "files-host")
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"hello from $GREETING in $(pwd)\"\necho to-stderr >&2\n"
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(n.host), Name: "key"}, Data: map[string][]byte{"key": []byte("s3cret")}}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	plan := n.apply(t, "files", agentv1.NodePlanSpec{
		Files: []agentv1.PlanFile{
			{Path: filepath.Join(dir, "bin/hello.sh"), Content: ptr.To(script), Mode: "0750", Owner: owner, Digest: agentv1.Digest([]byte(script))},
			{Path: filepath.Join(dir, "secret.key"), ContentRef: &agentv1.ContentRef{SecretKeyRef: &agentv1.KeyReference{Name: "key", Key: "key"}, Digest: agentv1.Digest([]byte("s3cret"))}, Mode: "0600"},
			{Path: filepath.Join(dir, "b64"), Content: ptr.To("aGk="), Encoding: "base64"},
			{Path: stale, Delete: true},
		},
		Instructions: []agentv1.Instruction{
			{Name: "hello", Command: filepath.Join(dir, "bin/hello.sh"), Env: []agentv1.EnvVar{{Name: "GREETING", Value: "the plan"}}, WorkingDir: dir, SaveOutput: true},
			{Name: "quiet", Command: "sh", Args: []string{"-c", "echo not kept"}},
		},
	})
	done := waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)

	for path, want := range map[string]os.FileMode{"bin/hello.sh": 0o750, "secret.key": 0o600, "b64": 0o644} {
		info, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", path, info.Mode().Perm(), want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b64")); string(b) != "hi" {
		t.Errorf("base64 file holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "secret.key")); string(b) != "s3cret" {
		t.Errorf("secret file holds %q", b)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the deleted file is still there: %v", err)
	}
	if len(done.Status.Instructions) != 2 {
		t.Fatalf("instruction statuses: %+v", done.Status.Instructions)
	}
	hello, quiet := done.Status.Instructions[0], done.Status.Instructions[1]
	wantOut := "hello from the plan in " + dir
	if hello.ExitCode != 0 || !strings.Contains(hello.Output, wantOut) || !strings.Contains(hello.Output, "to-stderr") {
		t.Errorf("hello: exit %d output %q; want %q and stderr", hello.ExitCode, hello.Output, wantOut)
	}
	if quiet.Output != "" {
		t.Errorf("an instruction without saveOutput kept %q", quiet.Output)
	}
	if c := condition(done, agentv1.ConditionFilesApplied); c.Status != metav1.ConditionTrue {
		t.Errorf("FilesApplied %+v", c)
	}
	if done.Status.StartTime == nil || done.Status.CompletionTime == nil || done.Status.Attempts != 1 {
		t.Errorf("status times/attempts: %+v", done.Status)
	}
	// The agent releases the lock right after it writes the status the test just read: give it a moment.
	eventually(t, 5*time.Second, "the lock released after the plan", func() (bool, string) {
		info, _ := os.ReadFile(n.lockFile)
		return len(info) == 0, string(info)
	})

	// Content changed after admission: the agent refuses it and never writes the file.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(n.host), Name: "tampered"}, Data: map[string]string{"f": "original"}}
	if err := admin.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// The agent is busy with nothing; make it wait on a held lock until the tampering is done.
	tampered := newPlan(n.host, "tampered", agentv1.NodePlanSpec{Files: []agentv1.PlanFile{{
		Path: filepath.Join(dir, "tampered"), ContentRef: &agentv1.ContentRef{ConfigMapKeyRef: &agentv1.KeyReference{Name: "tampered", Key: "f"}, Digest: agentv1.Digest([]byte("original"))},
	}}})
	holdLock(t, n.lockFile, "someone/else")
	if err := admin.Create(ctx, tampered); err != nil {
		t.Fatal(err)
	}
	cm.Data["f"] = "evil"
	if err := admin.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	releaseLock(t, n.lockFile)
	failed := waitPhase(t, tampered, agentv1.PhaseFailed, 30*time.Second)
	if !strings.Contains(failed.Status.Message, "does not match") {
		t.Errorf("tampered content: %s", failed.Status.Message)
	}
	if _, err := os.Stat(filepath.Join(dir, "tampered")); !os.IsNotExist(err) {
		t.Errorf("refused content was written: %v", err)
	}
}

func TestAgentDownloadsOneContentOnceAndLinksItsOtherPaths(t *testing.T) {
	n := startNode(t, "link-host")
	content := []byte("#!/bin/sh\necho multi-call\n")
	var gets atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gets.Add(1)
		_, _ = w.Write(content)
	}))
	defer server.Close()
	dir := t.TempDir()
	ref := func() *agentv1.ContentRef {
		return &agentv1.ContentRef{URL: server.URL + "/node/bin/kube", Digest: agentv1.Digest(content)}
	}
	plan := n.apply(t, "links", agentv1.NodePlanSpec{Files: []agentv1.PlanFile{
		{Path: filepath.Join(dir, "kubelet"), ContentRef: ref(), Mode: "0755"},
		{Path: filepath.Join(dir, "kubeadm"), ContentRef: ref(), Mode: "0755"},
		// Another mode is another file: downloaded again.
		{Path: filepath.Join(dir, "copy"), ContentRef: ref(), Mode: "0644"},
	}})
	waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)
	kubelet, err := os.Stat(filepath.Join(dir, "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	kubeadm, err := os.Stat(filepath.Join(dir, "kubeadm"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(kubelet, kubeadm) || kubeadm.Mode().Perm() != 0o755 {
		t.Errorf("kubeadm is not a link to kubelet (same file %v, mode %o)", os.SameFile(kubelet, kubeadm), kubeadm.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kubeadm")); string(b) != string(content) {
		t.Errorf("kubeadm holds %q", b)
	}
	if copied, err := os.Stat(filepath.Join(dir, "copy")); err != nil || os.SameFile(copied, kubelet) || copied.Mode().Perm() != 0o644 {
		t.Errorf("the 0644 copy: %v, same file %v", err, err == nil && os.SameFile(copied, kubelet))
	}
	if got := gets.Load(); got != 2 {
		t.Errorf("%d downloads, want 2 (one per mode)", got)
	}
}

func TestAgentWaitsForAnHTTPSProbeWithACAFromASecret(t *testing.T) {
	n := startNode(t, "probe-host")
	var healthy atomic.Bool
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer server.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentv1.PlanNamespace(n.host), Name: "service-ca"}, Data: map[string][]byte{"ca.crt": caPEM}}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "config")
	plan := n.apply(t, "wait-for-service", agentv1.NodePlanSpec{
		Files: []agentv1.PlanFile{{Path: marker, Content: ptr.To("x")}},
		Probes: []agentv1.NamedProbe{
			{Name: "service", Probe: agentv1.Probe{HTTPGet: &agentv1.HTTPGetProbe{URL: server.URL + "/healthz", CASecretRef: &agentv1.KeyReference{Name: "service-ca", Key: "ca.crt"}}, PeriodSeconds: 1, SuccessThreshold: 2}},
			{Name: "config", Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: marker}}},
		},
	})
	eventually(t, 20*time.Second, "the HTTPS probe reports failures while the service is down", func() (bool, string) {
		var got agentv1.NodePlan
		if err := admin.Get(ctx, client.ObjectKeyFromObject(plan), &got); err != nil {
			return false, err.Error()
		}
		for _, s := range got.Status.ProbeStatuses {
			if s.Name == "service" && s.FailureCount > 0 && strings.Contains(s.LastMessage, "503") {
				return got.Status.Phase == agentv1.PhaseExecuting, string(got.Status.Phase)
			}
		}
		return false, fmt.Sprintf("%+v", got.Status.ProbeStatuses)
	})
	healthy.Store(true)
	done := waitPhase(t, plan, agentv1.PhaseApplied, 20*time.Second)
	for _, s := range done.Status.ProbeStatuses {
		if !s.Healthy {
			t.Errorf("probe %s not healthy: %+v", s.Name, s)
		}
	}
	if c := condition(done, agentv1.ConditionProbesHealthy); c.Status != metav1.ConditionTrue {
		t.Errorf("ProbesHealthy %+v", c)
	}

	// Without the CA, the same URL is not trusted.
	untrusted := n.apply(t, "untrusted", agentv1.NodePlanSpec{Probes: []agentv1.NamedProbe{
		{Name: "service", Probe: agentv1.Probe{HTTPGet: &agentv1.HTTPGetProbe{URL: server.URL}, FailureThreshold: 2}},
	}})
	failed := waitPhase(t, untrusted, agentv1.PhaseFailed, 20*time.Second)
	if !strings.Contains(failed.Status.Message, "certificate") {
		t.Errorf("untrusted probe failed with %q; want a certificate error", failed.Status.Message)
	}
}

func TestAgentRetriesWithBackoffUntilAnAttemptSucceeds(t *testing.T) {
	n := startNode(t, "retry-host")
	dir := t.TempDir()
	counter, starts := filepath.Join(dir, "count"), filepath.Join(dir, "starts")
	plan := n.apply(t, "flaky", agentv1.NodePlanSpec{
		Instructions: []agentv1.Instruction{{Name: "third-time-lucky", Command: "sh", SaveOutput: true, Args: []string{"-c",
			`date +%s%N >> "$1"; n=$(cat "$0" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0"; echo "try $n"; [ $n -ge 3 ]`, counter, starts}}},
		RetryStrategy: &agentv1.RetryStrategy{MaxAttempts: 5, InitialBackoff: &metav1.Duration{Duration: 200 * time.Millisecond}, BackoffMultiplier: "2", MaxBackoff: &metav1.Duration{Duration: time.Second}},
	})
	done := waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)
	if done.Status.Attempts != 3 {
		t.Errorf("attempts %d, want 3", done.Status.Attempts)
	}
	if got := done.Status.Instructions; len(got) != 1 || got[0].Attempt != 3 || !strings.Contains(got[0].Output, "try 3") {
		t.Errorf("instruction status %+v", got)
	}
	// Backoff waited 200ms, then 400ms, between the three attempts. Measured from the
	// instruction's own start times: the status times are whole seconds.
	gaps := attemptGaps(t, starts)
	if len(gaps) != 2 || gaps[0] < 200*time.Millisecond || gaps[1] < 400*time.Millisecond {
		t.Errorf("gaps between the attempts' starts %v; want at least [200ms 400ms]", gaps)
	}

	exhausted := n.apply(t, "always-fails", agentv1.NodePlanSpec{
		Instructions:  []agentv1.Instruction{{Name: "fail", Command: "false"}},
		RetryStrategy: &agentv1.RetryStrategy{MaxAttempts: 2, InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}},
	})
	failed := waitPhase(t, exhausted, agentv1.PhaseFailed, 30*time.Second)
	if failed.Status.Attempts != 2 || !strings.Contains(failed.Status.Message, "attempt 2 of 2 failed") || !strings.Contains(failed.Status.Message, "exit code 1") {
		t.Errorf("exhausted retries: attempts %d, %q", failed.Status.Attempts, failed.Status.Message)
	}
}

func TestAgentFailsARequiredPreflightBeforeRunningAnything(t *testing.T) {
	n := startNode(t, "preflight-host")
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	plan := n.apply(t, "needs-config", agentv1.NodePlanSpec{
		PreflightChecks: []agentv1.PreflightCheck{
			{Name: "optional", Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: "/nonexistent/optional"}}},
			{Name: "config", Required: true, Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: "/nonexistent/config"}}},
		},
		Files:        []agentv1.PlanFile{{Path: filepath.Join(dir, "written"), Content: ptr.To("x")}},
		Instructions: []agentv1.Instruction{{Name: "touch", Command: "touch", Args: []string{ran}}},
	})
	failed := waitPhase(t, plan, agentv1.PhaseFailed, 30*time.Second)
	c := condition(failed, agentv1.ConditionPreflightPassed)
	if c.Status != metav1.ConditionFalse || c.Reason != "RequiredCheckFailed" || !strings.Contains(c.Message, "config") {
		t.Errorf("PreflightPassed %+v", c)
	}
	for _, f := range []string{ran, filepath.Join(dir, "written")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s exists: the plan ran past a failed required preflight", f)
		}
	}

	// An optional failure alone is recorded and the plan goes on.
	optional := n.apply(t, "optional-only", agentv1.NodePlanSpec{
		PreflightChecks: []agentv1.PreflightCheck{{Name: "optional", Probe: agentv1.Probe{FileExists: &agentv1.FileExistsProbe{Path: "/nonexistent/optional"}}}},
		Instructions:    []agentv1.Instruction{{Name: "touch", Command: "touch", Args: []string{ran}}},
	})
	applied := waitPhase(t, optional, agentv1.PhaseApplied, 30*time.Second)
	if c := condition(applied, agentv1.ConditionPreflightPassed); c.Reason != "OptionalCheckFailed" {
		t.Errorf("PreflightPassed %+v", c)
	}
}

func TestAgentTimesOutAndCancels(t *testing.T) {
	n := startNode(t, "timeout-host")
	start := time.Now()
	plan := n.apply(t, "too-slow", agentv1.NodePlanSpec{
		Instructions:     []agentv1.Instruction{{Name: "sleep", Command: "sleep", Args: []string{"60"}}},
		ExecutionTimeout: &metav1.Duration{Duration: 2 * time.Second},
	})
	failed := waitPhase(t, plan, agentv1.PhaseFailed, 30*time.Second)
	if !strings.Contains(failed.Status.Message, "timed out after 2s") {
		t.Errorf("timeout message %q", failed.Status.Message)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("a 2s timeout took %s", took)
	}

	perInstruction := n.apply(t, "instruction-timeout", agentv1.NodePlanSpec{
		Instructions: []agentv1.Instruction{{Name: "sleep", Command: "sleep", Args: []string{"60"}, Timeout: &metav1.Duration{Duration: time.Second}}},
	})
	failed = waitPhase(t, perInstruction, agentv1.PhaseFailed, 30*time.Second)
	if !strings.Contains(failed.Status.Message, "timed out after 1s") {
		t.Errorf("instruction timeout message %q", failed.Status.Message)
	}

	ctx := context.Background()
	long := n.apply(t, "cancel-me", agentv1.NodePlanSpec{Instructions: []agentv1.Instruction{{Name: "sleep", Command: "sleep", Args: []string{"60"}}}})
	waitPhase(t, long, agentv1.PhaseExecuting, 20*time.Second)
	patch := []byte(`{"metadata":{"annotations":{"` + agentv1.CancelAnnotation + `":"true"}}}`)
	if err := admin.Patch(ctx, long, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, long, agentv1.PhaseCancelled, 20*time.Second)
}

// execLog is an instruction that logs its start and end, and an "overlap" line when it
// starts while an earlier run's shell (its PID in <log>.pid) is still alive (a zombie
// waiting to be reaped is dead).
func execLog(name, logFile string, seconds string) agentv1.Instruction {
	return agentv1.Instruction{Name: name, Command: "sh", Args: []string{"-c", `
if [ -f "$1.pid" ]; then
  state=$(awk '{print $3}' "/proc/$(cat "$1.pid")/stat" 2>/dev/null)
  if [ -n "$state" ] && [ "$state" != Z ]; then echo "overlap $0 with pid $(cat "$1.pid") in state $state" >> "$1"; fi
fi
echo $$ > "$1.pid"
echo "start $0 $(date +%s%N)" >> "$1"
sleep "$2"
echo "end $0 $(date +%s%N)" >> "$1"
rm -f "$1.pid"`, name, logFile, seconds}}
}

// assertSerial checks that no run started while another was alive, and returns the log.
func assertSerial(t *testing.T, logFile string) []string {
	t.Helper()
	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "overlap") {
		t.Errorf("two runs at once:\n%s", raw)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

func TestTwoPlansShareTheLockAndOneWaits(t *testing.T) {
	n := startNode(t, "lock-host")
	logFile := filepath.Join(t.TempDir(), "runs")
	ctx := context.Background()

	// Another holder (a live process: this test) has the lock: both plans wait on it.
	holdLock(t, n.lockFile, "other-producer/plan")
	a := n.apply(t, "plan-a", agentv1.NodePlanSpec{Instructions: []agentv1.Instruction{execLog("a", logFile, "2")}})
	b := n.apply(t, "plan-b", agentv1.NodePlanSpec{Instructions: []agentv1.Instruction{execLog("b", logFile, "2")}})
	eventually(t, 20*time.Second, "both plans wait for the other holder", func() (bool, string) {
		waiting := 0
		for _, p := range []*agentv1.NodePlan{a, b} {
			var got agentv1.NodePlan
			if err := admin.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				return false, err.Error()
			}
			if got.Status.Phase == agentv1.PhasePending && strings.Contains(got.Status.LockHolder, "other-producer/plan") {
				waiting++
			}
		}
		return waiting == 2, fmt.Sprintf("%d waiting", waiting)
	})
	releaseLock(t, n.lockFile)

	// Then one runs while the other waits on it.
	sawWaiting := false
	eventually(t, 30*time.Second, "both applied", func() (bool, string) {
		applied := 0
		for _, p := range []*agentv1.NodePlan{a, b} {
			var got agentv1.NodePlan
			if err := admin.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				return false, err.Error()
			}
			if got.Status.Phase == agentv1.PhasePending && strings.Contains(got.Status.LockHolder, "plan-") {
				sawWaiting = true
			}
			if got.Status.Phase == agentv1.PhaseApplied {
				applied++
			}
		}
		return applied == 2, fmt.Sprintf("%d applied", applied)
	})
	if !sawWaiting {
		t.Error("never saw one plan waiting on the other's lock")
	}
	if lines := assertSerial(t, logFile); len(lines) != 4 {
		t.Errorf("runs log:\n%s", strings.Join(lines, "\n"))
	}
}

func TestAgentKilledMidInstructionResumesWithoutRunningTwiceAtOnce(t *testing.T) {
	n := startNode(t, "crash-host")
	logFile := filepath.Join(t.TempDir(), "runs")
	plan := n.apply(t, "interrupted", agentv1.NodePlanSpec{
		Instructions:  []agentv1.Instruction{execLog("work", logFile, "5")},
		RetryStrategy: &agentv1.RetryStrategy{MaxAttempts: 3, InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}},
	})
	eventually(t, 20*time.Second, "the instruction started", func() (bool, string) {
		raw, _ := os.ReadFile(logFile)
		return strings.Contains(string(raw), "start"), string(raw)
	})
	n.agent.kill()

	// The dead agent's lock is left behind, naming the plan and a dead PID.
	var info agent.LockInfo
	raw, err := os.ReadFile(n.lockFile)
	if err != nil || json.Unmarshal(raw, &info) != nil {
		t.Fatalf("lock after SIGKILL: %q %v", raw, err)
	}
	if info.Plan != agentv1.PlanNamespace(n.host)+"/interrupted" || info.PID != n.agent.cmd.Process.Pid || info.ChildPGID == 0 || info.Instruction != "work" {
		t.Errorf("lock after SIGKILL: %+v", info)
	}
	// Before any restart, the instruction's guard ended its whole group: the shell and its
	// `sleep 5` child do not run on unsupervised (they did, until the next agent start).
	eventually(t, 3*time.Second, "the killed agent's instruction gone", func() (bool, string) {
		left := groupProcesses(info.ChildPGID)
		return len(left) == 0, strings.Join(left, "; ")
	})

	restarted := startAgent(t, n.dataDir, n.lockFile)
	done := waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)
	if done.Status.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (the interrupted one counts)", done.Status.Attempts)
	}
	want := agentv1.PlanInterruption{Attempt: 1, Instruction: "work", AgentPID: int32(info.PID)}
	if got := done.Status.Interruptions; len(got) != 1 || got[0].Attempt != want.Attempt || got[0].Instruction != want.Instruction || got[0].AgentPID != want.AgentPID ||
		got[0].KilledProcesses != 0 || got[0].ResumedTime.IsZero() || !strings.Contains(got[0].Message, "stopped during instruction work; none of its processes was left running") {
		t.Errorf("interruptions %+v, want one like %+v", got, want)
	}
	if done.Status.Message != "applied in attempt 2" {
		t.Errorf("message %q", done.Status.Message)
	}
	lines := assertSerial(t, logFile)
	starts, ends := 0, 0
	for _, l := range lines {
		if strings.HasPrefix(l, "start") {
			starts++
		} else {
			ends++
		}
	}
	if starts != 2 || ends != 1 {
		t.Errorf("want two starts and one end (the killed run never ends):\n%s", strings.Join(lines, "\n"))
	}
	// The agent writes the outcome before it releases the lock, so Applied can be seen a moment before the release.
	eventually(t, 3*time.Second, "the lock released after the resumed plan", func() (bool, string) {
		raw, _ := os.ReadFile(n.lockFile)
		return len(raw) == 0, string(raw)
	})
	if !strings.Contains(restarted.stderr.String(), "resuming the plan") {
		t.Errorf("the restarted agent did not say it resumed:\n%s", restarted.stderr)
	}
}

func TestAgentStoppedMidInstructionResumesAndSaysWhere(t *testing.T) {
	n := startNode(t, "stop-host")
	logFile := filepath.Join(t.TempDir(), "runs")
	plan := n.apply(t, "stopped", agentv1.NodePlanSpec{
		Instructions:  []agentv1.Instruction{execLog("work", logFile, "2")},
		RetryStrategy: &agentv1.RetryStrategy{MaxAttempts: 2, InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}},
	})
	eventually(t, 20*time.Second, "the instruction started", func() (bool, string) {
		raw, _ := os.ReadFile(logFile)
		return strings.Contains(string(raw), "start"), string(raw)
	})
	pid := n.agent.cmd.Process.Pid
	n.agent.signal(syscall.SIGTERM)
	n.agent.exitCode(t, 15*time.Second)

	startAgent(t, n.dataDir, n.lockFile)
	done := waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)
	if got := done.Status.Interruptions; done.Status.Attempts != 2 || len(got) != 1 || got[0].Attempt != 1 || got[0].Instruction != "work" || got[0].AgentPID != int32(pid) ||
		!strings.Contains(got[0].Message, "stopped during instruction work; none of its processes was left running") {
		t.Errorf("attempts %d, interruptions %+v", done.Status.Attempts, got)
	}
	assertSerial(t, logFile)
}

func TestStaleLockOfAnotherPlanIsReleased(t *testing.T) {
	n := &node{host: "stale-host", dataDir: registerHost(t, "stale-host"), lockFile: filepath.Join(t.TempDir(), "plan.lock")}
	// A lock left by a process that no longer exists, for a plan that is not ours, and
	// a live PID whose heartbeat is far too old: both are stale.
	for _, stale := range []agent.LockInfo{
		{Plan: "elsewhere/gone", PID: deadPID(t), Heartbeat: time.Now()},
		{Plan: "elsewhere/hung", PID: os.Getpid(), Heartbeat: time.Now().Add(-time.Hour)},
	} {
		raw, _ := json.Marshal(stale)
		if err := os.WriteFile(n.lockFile, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		proc := startAgent(t, n.dataDir, n.lockFile, "--lock-stale-after", "30s")
		plan := n.apply(t, "after-"+strings.TrimPrefix(stale.Plan, "elsewhere/"), oneInstruction("ok", "true"))
		waitPhase(t, plan, agentv1.PhaseApplied, 30*time.Second)
		proc.signal(15)
		proc.exitCode(t, 15*time.Second)
	}
}

func holdLock(t *testing.T, lockFile, plan string) {
	t.Helper()
	raw, _ := json.Marshal(agent.LockInfo{Plan: plan, PID: os.Getpid(), AcquiredAt: time.Now(), Heartbeat: time.Now()})
	if err := os.WriteFile(lockFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func releaseLock(t *testing.T, lockFile string) {
	t.Helper()
	if err := os.WriteFile(lockFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// deadPID is the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

// attemptGaps reads the nanosecond start times an instruction appended to file, one per
// attempt, and returns the time between consecutive starts.
func attemptGaps(t *testing.T, file string) []time.Duration {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the attempts' start times: %v", err)
	}
	var starts []int64
	for _, line := range strings.Fields(string(data)) {
		ns, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("start time %q: %v", line, err)
		}
		starts = append(starts, ns)
	}
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, time.Duration(starts[i]-starts[i-1]))
	}
	return gaps
}

// groupProcesses lists the live processes of a process group ("pid comm state").
func groupProcesses(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces.
		i := strings.LastIndexByte(string(raw), ')')
		fields := strings.Fields(string(raw[i+1:]))
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			found = append(found, string(raw[:i+1])+" "+fields[0])
		}
	}
	return found
}
