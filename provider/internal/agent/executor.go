package agent

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"crypto/sha256"
	"encoding/hex"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/contentref"
)

// Why an execution's context ended, when it did not end by itself.
var (
	errTimedOut   = errors.New("the execution timed out")
	errCancelled  = errors.New("the plan was cancelled")
	errSuperseded = errors.New("the plan's spec was changed with force-update")
	errDeleted    = errors.New("the plan was deleted")
	errStopping   = errors.New("the agent is stopping")
)

// outputTail is how much of an instruction's output status keeps.
const outputTail = 4096

// Reporter writes a plan's status: it applies mutate to the latest status and saves it.
type Reporter func(ctx context.Context, mutate func(*agentv1.NodePlanStatus)) error

// Executor runs one plan: attempts of preflight, files, instructions and probes, with
// backoff between them, within the execution timeout.
type Executor struct {
	// Reader reads the Secrets and ConfigMaps the plan references.
	Reader client.Reader
	// Report saves status.
	Report Reporter
	// Lock records the running instruction's process group.
	Lock *Lock
	Log  logr.Logger
	// Self is the agent's own executable, which runs each instruction under its guard
	// (GuardCommand). Default: /proc/self/exe.
	Self string
	// APIServer is the agent's API server: a contentRef URL below it (the node artifacts a
	// self-managed cluster serves through its service proxy) is fetched with APIClient,
	// the agent's own credentials; any other URL with http.DefaultClient, which sends
	// none. Default: none (every URL without credentials).
	APIServer *APIServerClient

	// unwritten is the progress recorded since the last status write, in order. Only what
	// must be on record before the agent goes on is written at once (a new attempt, the
	// instruction about to run, a retry's backoff, a wait for probes), and it carries what
	// came before it: a plan of four instructions made thirteen writes, two per instruction,
	// each a get and an update, on the path to its node; it makes six. Whatever is left goes
	// out with the outcome (Outcome.Unwritten).
	unwritten []func(*agentv1.NodePlanStatus)
}

// APIServerClient is the agent's API server and an HTTP client carrying its credentials.
type APIServerClient struct {
	// Server is the credential's server URL, e.g. https://198.19.0.10:6443.
	Server string
	Client *http.Client
}

// clientFor is the client a URL is fetched with: the API server's, with the agent's
// credentials, only for a URL of that very scheme and host (and below its path); any
// other URL gets none.
func (e *Executor) clientFor(raw string) *http.Client {
	if e.APIServer == nil || e.APIServer.Client == nil {
		return http.DefaultClient
	}
	if onServer(raw, e.APIServer.Server) {
		return e.APIServer.Client
	}
	return http.DefaultClient
}

// onServer says whether raw is below server: the same scheme and host (port included)
// and a path under the server's own.
func onServer(raw, server string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	s, err := url.Parse(server)
	if err != nil || s.Host == "" {
		return false
	}
	if !strings.EqualFold(u.Scheme, s.Scheme) || !strings.EqualFold(u.Host, s.Host) || u.User != nil {
		return false
	}
	base := strings.TrimSuffix(s.Path, "/")
	return base == "" || u.Path == base || strings.HasPrefix(u.Path, base+"/")
}

// Outcome is how an execution ended.
type Outcome struct {
	Phase   agentv1.NodePlanPhase
	Message string
	// Superseded: the spec changed under a force-update; the plan should run again.
	Superseded bool
	// Stopped: the agent is shutting down; the plan stays Executing for the next start.
	Stopped bool
	// Unwritten is the execution's last progress, not yet in status: the outcome's write
	// applies it first. Empty when Stopped (Execute writes it itself: no outcome follows).
	Unwritten []func(*agentv1.NodePlanStatus)
}

// Execute runs plan's attempts after priorAttempts (those an earlier agent process made
// before it stopped; interrupted, when not nil, says how the last of them ended and is
// added to the status). ctx is cancelled with a cause from this package to stop early.
func (e *Executor) Execute(ctx context.Context, plan *agentv1.NodePlan, priorAttempts int32, interrupted *agentv1.PlanInterruption) (outcome Outcome) {
	defer func() {
		if outcome.Stopped {
			e.write(ctx)
		}
		outcome.Unwritten, e.unwritten = e.unwritten, nil
	}()
	key := plan.Namespace + "/" + plan.Name
	timeout := 30 * time.Minute
	if plan.Spec.ExecutionTimeout != nil {
		timeout = plan.Spec.ExecutionTimeout.Duration
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	maxAttempts, backoffs := retrySchedule(plan.Spec.RetryStrategy)

	if interrupted != nil {
		next := fmt.Sprintf("attempt %d of %d follows", priorAttempts+1, maxAttempts)
		if priorAttempts >= maxAttempts {
			next = "no attempt is left"
		}
		e.record(func(s *agentv1.NodePlanStatus) {
			s.Interruptions = append(s.Interruptions, *interrupted)
			s.Message = interrupted.Message + "; " + next
		})
	}
	if priorAttempts >= maxAttempts {
		return Outcome{Phase: agentv1.PhaseFailed, Message: fmt.Sprintf("the agent stopped during attempt %d of %d; no attempt is left", priorAttempts, maxAttempts)}
	}
	for attempt := priorAttempts + 1; ; attempt++ {
		err := e.attempt(ctx, plan, key, attempt)
		if err == nil {
			return Outcome{Phase: agentv1.PhaseApplied, Message: fmt.Sprintf("applied in attempt %d", attempt)}
		}
		if ctx.Err() != nil {
			return stoppedOutcome(context.Cause(ctx), timeout, err)
		}
		if attempt >= maxAttempts {
			return Outcome{Phase: agentv1.PhaseFailed, Message: fmt.Sprintf("attempt %d of %d failed: %v", attempt, maxAttempts, err)}
		}
		wait := backoffs(attempt)
		e.Log.Info("attempt failed; retrying", "plan", key, "attempt", attempt, "backoff", wait.String(), "error", err.Error())
		e.report(ctx, func(s *agentv1.NodePlanStatus) {
			s.Message = fmt.Sprintf("attempt %d of %d failed: %v; next attempt in %s", attempt, maxAttempts, err, wait)
		})
		select {
		case <-ctx.Done():
			return stoppedOutcome(context.Cause(ctx), timeout, err)
		case <-time.After(wait):
		}
	}
}

func stoppedOutcome(cause error, timeout time.Duration, last error) Outcome {
	switch {
	case errors.Is(cause, errTimedOut):
		return Outcome{Phase: agentv1.PhaseFailed, Message: fmt.Sprintf("execution timed out after %s (last: %v)", timeout, last)}
	case errors.Is(cause, errCancelled):
		return Outcome{Phase: agentv1.PhaseCancelled, Message: "cancelled by the " + agentv1.CancelAnnotation + " annotation"}
	case errors.Is(cause, errSuperseded):
		return Outcome{Phase: agentv1.PhasePending, Message: "spec changed with force-update; running the new spec", Superseded: true}
	case errors.Is(cause, errStopping):
		return Outcome{Phase: agentv1.PhaseExecuting, Stopped: true}
	default:
		return Outcome{Phase: agentv1.PhaseFailed, Message: fmt.Sprintf("stopped: %v", cause)}
	}
}

// retrySchedule returns the attempt budget and the wait after failed attempt n.
func retrySchedule(rs *agentv1.RetryStrategy) (int32, func(n int32) time.Duration) {
	maxAttempts, initial, multiplier, maxBackoff := int32(1), time.Second, 2.0, time.Minute
	if rs != nil {
		if rs.MaxAttempts > 0 {
			maxAttempts = rs.MaxAttempts
		}
		if rs.InitialBackoff != nil {
			initial = rs.InitialBackoff.Duration
		}
		if m, err := strconv.ParseFloat(rs.BackoffMultiplier, 64); err == nil && m >= 1 {
			multiplier = m
		}
		if rs.MaxBackoff != nil {
			maxBackoff = rs.MaxBackoff.Duration
		}
	}
	return maxAttempts, func(n int32) time.Duration {
		d := float64(initial) * math.Pow(multiplier, float64(n-1))
		if d > float64(maxBackoff) {
			return maxBackoff
		}
		return time.Duration(d)
	}
}

// record adds mutate to the progress that the next write carries.
func (e *Executor) record(mutate func(*agentv1.NodePlanStatus)) {
	e.unwritten = append(e.unwritten, mutate)
}

// report records mutate and writes it at once, with everything recorded before it.
func (e *Executor) report(ctx context.Context, mutate func(*agentv1.NodePlanStatus)) {
	e.record(mutate)
	e.write(ctx)
}

// write saves the unwritten progress in one status update, in the order it was recorded,
// even when ctx is already cancelled (the last word must land). A refused write is logged
// and its changes stay for the next one, so none is lost and the order holds.
func (e *Executor) write(ctx context.Context) {
	if len(e.unwritten) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := e.Report(rctx, inOrder(e.unwritten)); err != nil {
		e.Log.Error(err, "status update failed", "changes", len(e.unwritten))
		return
	}
	e.unwritten = nil
}

// inOrder is one change of status made of changes, applied in the order given.
func inOrder(changes []func(*agentv1.NodePlanStatus)) func(*agentv1.NodePlanStatus) {
	return func(s *agentv1.NodePlanStatus) {
		for _, mutate := range changes {
			mutate(s)
		}
	}
}

func setCondition(s *agentv1.NodePlanStatus, generation int64, typ string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation})
}

func (e *Executor) attempt(ctx context.Context, plan *agentv1.NodePlan, key string, attempt int32) error {
	gen := plan.Generation
	// Written before anything runs: an agent that dies in this attempt leaves the plan
	// Executing with the attempt counted, for the next start to resume.
	e.report(ctx, func(s *agentv1.NodePlanStatus) {
		if s.ObservedGeneration != gen || s.StartTime == nil {
			s.StartTime = &metav1.Time{Time: time.Now()}
		}
		if s.ObservedGeneration != gen {
			s.Interruptions = nil // an earlier generation's
		}
		s.ObservedGeneration = gen
		s.Phase = agentv1.PhaseExecuting
		s.Attempts = attempt
		s.LockHolder = key
		s.CompletionTime = nil
		s.Message = fmt.Sprintf("attempt %d", attempt)
		s.Instructions = nil
		s.ProbeStatuses = nil
		for _, t := range []string{agentv1.ConditionPreflightPassed, agentv1.ConditionFilesApplied, agentv1.ConditionInstructionsSucceeded, agentv1.ConditionProbesHealthy} {
			meta.RemoveStatusCondition(&s.Conditions, t)
		}
		setCondition(s, gen, agentv1.ConditionLockAcquired, true, "Held", "this plan holds the node's plan lock")
	})

	if err := e.preflight(ctx, plan); err != nil {
		return err
	}
	if err := e.files(ctx, plan); err != nil {
		return err
	}
	if err := e.instructions(ctx, plan, key, attempt); err != nil {
		return err
	}
	return e.probes(ctx, plan)
}

func (e *Executor) preflight(ctx context.Context, plan *agentv1.NodePlan) error {
	if len(plan.Spec.PreflightChecks) == 0 {
		return nil
	}
	var requiredFailed, optionalFailed []string
	for i := range plan.Spec.PreflightChecks {
		check := &plan.Spec.PreflightChecks[i]
		if err := evaluateProbe(ctx, e.Reader, plan.Namespace, &check.Probe); err != nil {
			msg := fmt.Sprintf("%s: %v", check.Name, err)
			if check.Required {
				requiredFailed = append(requiredFailed, msg)
			} else {
				optionalFailed = append(optionalFailed, msg)
			}
		}
	}
	e.record(func(s *agentv1.NodePlanStatus) {
		switch {
		case len(requiredFailed) > 0:
			setCondition(s, plan.Generation, agentv1.ConditionPreflightPassed, false, "RequiredCheckFailed", strings.Join(append(requiredFailed, optionalFailed...), "; "))
		case len(optionalFailed) > 0:
			setCondition(s, plan.Generation, agentv1.ConditionPreflightPassed, true, "OptionalCheckFailed", strings.Join(optionalFailed, "; "))
		default:
			setCondition(s, plan.Generation, agentv1.ConditionPreflightPassed, true, "Passed", "every preflight check passed")
		}
	})
	if len(requiredFailed) > 0 {
		return fmt.Errorf("required preflight check failed: %s", strings.Join(requiredFailed, "; "))
	}
	return nil
}

func (e *Executor) files(ctx context.Context, plan *agentv1.NodePlan) error {
	if len(plan.Spec.Files) == 0 {
		return nil
	}
	// One download per content: a URL file whose digest, mode and owner an earlier one of
	// this plan had becomes a hard link to it (kubelet and kubeadm are both the multi-call
	// kube), and is downloaded only where the file system cannot link it.
	downloaded := map[string]string{}
	for i := range plan.Spec.Files {
		f := &plan.Spec.Files[i]
		key := ""
		if f.ContentRef != nil && f.ContentRef.URL != "" && !f.Delete {
			key = f.ContentRef.Digest + " " + f.Mode + " " + f.Owner
		}
		if first, ok := downloaded[key]; ok && key != "" && linkFile(first, f.Path) == nil {
			continue
		}
		if err := e.applyFile(ctx, plan.Namespace, f); err != nil {
			err = fmt.Errorf("file %s: %w", f.Path, err)
			e.record(func(s *agentv1.NodePlanStatus) {
				setCondition(s, plan.Generation, agentv1.ConditionFilesApplied, false, "FileFailed", err.Error())
			})
			return err
		}
		if key != "" {
			downloaded[key] = f.Path
		}
	}
	e.record(func(s *agentv1.NodePlanStatus) {
		setCondition(s, plan.Generation, agentv1.ConditionFilesApplied, true, "Applied", fmt.Sprintf("%d files", len(plan.Spec.Files)))
	})
	return nil
}

// applyFile writes through a temp file in the same directory, checks the digest while
// writing, and renames only content that matched: a refused file never replaces a good one.
func (e *Executor) applyFile(ctx context.Context, namespace string, f *agentv1.PlanFile) error {
	if f.Delete {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	src, wantDigest, err := e.fileSource(ctx, namespace, f)
	if err != nil {
		return err
	}
	defer src.Close()

	mode := os.FileMode(0o644)
	if f.Mode != "" {
		m, err := strconv.ParseUint(f.Mode, 8, 32)
		if err != nil {
			return fmt.Errorf("mode %q: %w", f.Mode, err)
		}
		mode = os.FileMode(m)
	}
	uid, gid, err := lookupOwner(f.Owner)
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".*.partial")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	sum := sha256.New()
	_, copyErr := io.Copy(io.MultiWriter(tmp, sum), src)
	if copyErr == nil && wantDigest != "" {
		if got := digestOf(sum); got != wantDigest {
			copyErr = fmt.Errorf("content digest %s does not match %s: refused", got, wantDigest)
		}
	}
	if copyErr == nil {
		copyErr = tmp.Chmod(mode) // explicit: the umask must not change the plan's mode
	}
	if copyErr == nil && uid >= 0 {
		copyErr = tmp.Chown(uid, gid)
	}
	if copyErr == nil {
		copyErr = tmp.Sync()
	}
	if err := tmp.Close(); copyErr == nil {
		copyErr = err
	}
	if copyErr != nil {
		return copyErr
	}
	return os.Rename(tmp.Name(), f.Path)
}

// linkFile makes path a hard link to first, replacing whatever path was, atomically
// (a temp link beside it, then a rename). first was just written and checked by this plan.
func linkFile(first, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".link.partial")
	_ = os.Remove(tmp)
	if err := os.Link(first, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func (e *Executor) fileSource(ctx context.Context, namespace string, f *agentv1.PlanFile) (io.ReadCloser, string, error) {
	if f.ContentRef == nil {
		content, err := f.InlineContent()
		if err != nil {
			return nil, "", err
		}
		return io.NopCloser(strings.NewReader(string(content))), f.Digest, nil
	}
	ref := f.ContentRef
	if ref.URL != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ref.URL, nil)
		if err != nil {
			return nil, "", err
		}
		resp, err := e.clientFor(ref.URL).Do(req)
		if err != nil {
			return nil, "", err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, "", fmt.Errorf("GET %s: HTTP %d", ref.URL, resp.StatusCode)
		}
		return resp.Body, ref.Digest, nil
	}
	keyRef, secret, what := ref.ConfigMapKeyRef, false, "configmap"
	if ref.SecretKeyRef != nil {
		keyRef, secret, what = ref.SecretKeyRef, true, "secret"
	}
	content, found, err := contentref.Read(ctx, e.Reader, namespace, keyRef, secret)
	if err != nil {
		return nil, "", fmt.Errorf("read %s %s/%s: %w", what, namespace, keyRef.Name, err)
	}
	if !found {
		return nil, "", fmt.Errorf("%s %s/%s key %q does not exist", what, namespace, keyRef.Name, keyRef.Key)
	}
	return io.NopCloser(strings.NewReader(string(content))), ref.Digest, nil
}

// lookupOwner resolves "user[:group]" (names or ids); -1 when no owner is set.
func lookupOwner(owner string) (int, int, error) {
	if owner == "" {
		return -1, -1, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(owner, ":")
	uid, err := strconv.Atoi(userPart)
	gid := -1
	if err != nil {
		u, err := user.Lookup(userPart)
		if err != nil {
			return 0, 0, fmt.Errorf("owner %q: %w", owner, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGroup {
		if gid, err = strconv.Atoi(groupPart); err != nil {
			g, err := user.LookupGroup(groupPart)
			if err != nil {
				return 0, 0, fmt.Errorf("owner %q: %w", owner, err)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
	}
	return uid, gid, nil
}

func (e *Executor) instructions(ctx context.Context, plan *agentv1.NodePlan, key string, attempt int32) error {
	if len(plan.Spec.Instructions) == 0 {
		return nil
	}
	for i := range plan.Spec.Instructions {
		ins := &plan.Spec.Instructions[i]
		started := metav1.Now()
		// On record before it runs: an agent killed during it leaves a status naming it.
		e.report(ctx, func(s *agentv1.NodePlanStatus) {
			s.Message = fmt.Sprintf("attempt %d: running %s", attempt, ins.Name)
		})
		exitCode, output, err := e.run(ctx, key, ins)
		done := metav1.Now()
		result := agentv1.InstructionStatus{Name: ins.Name, ExitCode: int32(exitCode), Attempt: attempt, StartTime: &started, CompletionTime: &done}
		if ins.SaveOutput {
			result.Output = output
		}
		e.record(func(s *agentv1.NodePlanStatus) {
			s.Instructions = append(s.Instructions, result)
			if err != nil {
				setCondition(s, plan.Generation, agentv1.ConditionInstructionsSucceeded, false, "InstructionFailed", fmt.Sprintf("%s: %v", ins.Name, err))
			}
		})
		if err != nil {
			return fmt.Errorf("instruction %s: %w", ins.Name, err)
		}
	}
	e.record(func(s *agentv1.NodePlanStatus) {
		setCondition(s, plan.Generation, agentv1.ConditionInstructionsSucceeded, true, "Succeeded", fmt.Sprintf("%d instructions", len(plan.Spec.Instructions)))
	})
	return nil
}

// run executes one instruction under the agent's guard (GuardCommand), in a process group
// of its own that is recorded in the lock so that whoever takes a stale lock over can kill
// it. The whole group dies with the agent (the guard kills it when the agent dies, even by
// SIGKILL) and is killed on timeout or cancellation.
func (e *Executor) run(ctx context.Context, key string, ins *agentv1.Instruction) (int, string, error) {
	timeout := 10 * time.Minute
	if ins.Timeout != nil {
		timeout = ins.Timeout.Duration
	}
	command, err := resolveCommand(ins.Command)
	if err != nil {
		return -1, "", err
	}
	self := e.Self
	if self == "" {
		self = guardExecutable
	}
	cmd := guardedCommand(self, append([]string{command}, ins.Args...))
	cmd.Dir = "/"
	if ins.WorkingDir != "" {
		cmd.Dir = ins.WorkingDir
	}
	cmd.Env = os.Environ()
	// The agent's own path, for instructions that call it (`"$PROVISIONER_AGENT" supervise
	// start ...`) wherever the host installed it; the plan's env may override it.
	if self, err := os.Executable(); err == nil {
		cmd.Env = append(cmd.Env, "PROVISIONER_AGENT="+self)
	}
	for _, env := range ins.Env {
		cmd.Env = append(cmd.Env, env.Name+"="+env.Value)
	}
	out := &tailBuffer{max: outputTail}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return -1, "", err
	}
	pgid := cmd.Process.Pid
	if e.Lock != nil {
		if err := e.Lock.Update(key, func(l *LockInfo) { l.ChildPGID, l.Instruction = pgid, ins.Name }); err != nil {
			e.Log.Error(err, "recording the instruction's process group in the lock")
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(timeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
		err = fmt.Errorf("timed out after %s", timeout)
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waited
		err = context.Cause(ctx)
	}
	// Whatever the command left in its group (backgrounded children) goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if e.Lock != nil {
		_ = e.Lock.Update(key, func(l *LockInfo) {
			l.ChildPGID = 0
			// A stopping agent keeps its lock: the next start says which instruction it stopped in.
			if !errors.Is(context.Cause(ctx), errStopping) {
				l.Instruction = ""
			}
		})
	}
	exitCode := -1
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		exitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitCode >= 0 {
		err = fmt.Errorf("exit code %d", exitCode)
	}
	return exitCode, out.String(), err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// probes polls every probe until each is healthy (successThreshold successes in a row)
// or one fails failureThreshold times in a row.
func (e *Executor) probes(ctx context.Context, plan *agentv1.NodePlan) error {
	probes := plan.Spec.Probes
	if len(probes) == 0 {
		return nil
	}
	statuses := make([]agentv1.ProbeStatus, len(probes))
	due := make([]time.Time, len(probes))
	for i := range probes {
		statuses[i].Name = probes[i].Name
	}
	save := func(healthy bool, failure error) {
		snapshot := append([]agentv1.ProbeStatus(nil), statuses...)
		e.record(func(s *agentv1.NodePlanStatus) {
			s.ProbeStatuses = snapshot
			switch {
			case failure != nil:
				setCondition(s, plan.Generation, agentv1.ConditionProbesHealthy, false, "ProbeFailed", failure.Error())
			case healthy:
				setCondition(s, plan.Generation, agentv1.ConditionProbesHealthy, true, "Healthy", "every probe is healthy")
			default:
				setCondition(s, plan.Generation, agentv1.ConditionProbesHealthy, false, "Waiting", "waiting for probes")
			}
		})
	}
	save(false, nil)
	for {
		now := time.Now()
		changed := false
		next := now.Add(time.Hour)
		for i := range probes {
			p, st := &probes[i].Probe, &statuses[i]
			if st.Healthy {
				continue
			}
			if now.Before(due[i]) {
				next = minTime(next, due[i])
				continue
			}
			err := evaluateProbe(ctx, e.Reader, plan.Namespace, p)
			st.LastProbeTime = &metav1.Time{Time: now}
			if err == nil {
				st.SuccessCount++
				st.FailureCount = 0
				st.LastMessage = ""
				if st.SuccessCount >= max(p.SuccessThreshold, 1) {
					st.Healthy, changed = true, true
				}
			} else {
				changed = changed || st.LastMessage != err.Error() || st.SuccessCount > 0
				st.SuccessCount = 0
				st.FailureCount++
				st.LastMessage = err.Error()
				if threshold := p.FailureThreshold; threshold > 0 && st.FailureCount >= threshold {
					failure := fmt.Errorf("probe %s failed %d times in a row: %v", probes[i].Name, st.FailureCount, err)
					save(false, failure)
					return failure
				}
			}
			due[i] = now.Add(time.Duration(max(p.PeriodSeconds, 1)) * time.Second)
			next = minTime(next, due[i])
		}
		allHealthy := true
		for i := range statuses {
			allHealthy = allHealthy && statuses[i].Healthy
		}
		if allHealthy {
			save(true, nil)
			return nil
		}
		if changed {
			save(false, nil)
		}
		// Waiting: what the probes saw so far goes on record.
		e.write(ctx)
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Until(next)):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
