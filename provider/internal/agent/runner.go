package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	"provisioner.dev/provider/internal/version"
)

// DefaultHeartbeatInterval is how often an agent reports to its Host and looks for a
// hand-over when no interval is given: 30 s.
const DefaultHeartbeatInterval = 30 * time.Second

// HeartbeatEvery is the interval asked for, or DefaultHeartbeatInterval when none is.
func HeartbeatEvery(interval time.Duration) time.Duration {
	if interval <= 0 {
		return DefaultHeartbeatInterval
	}
	return interval
}

// RunOptions are the run command's inputs.
type RunOptions struct {
	DataDir DataDir
	// LockPath is the node's plan lock file.
	LockPath string
	// LockStaleAfter: a lock whose holder has not refreshed it for this long is taken over.
	LockStaleAfter time.Duration
	// HeartbeatInterval between two Host status reports (each also checks the credential
	// and renews the token when a third of its life is left). Default: DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	Log               logr.Logger
}

// Run watches this host's NodePlans and executes them, one at a time, until ctx ends or
// the server stops accepting the credential.
func Run(ctx context.Context, o RunOptions) error {
	cred, err := o.DataDir.LoadCredential()
	if err != nil {
		return err
	}
	if cred == nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("not registered: no credential in %s; run `provisioner-agent register` first", o.DataDir)}
	}
	cfg := &rest.Config{
		Host:            cred.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: cred.CAData},
		BearerTokenFile: o.DataDir.TokenPath(),
		UserAgent:       "provisioner-agent/" + version.Version,
		// A plan's execution writes status a handful of times per instruction (each a
		// GET and a PUT); client-go's default 5 QPS made a one-instruction plan wait ~1s.
		QPS:   20,
		Burst: 40,
	}
	scheme := Scheme()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	// For contentRef URLs on this API server (the node artifacts a self-managed cluster serves).
	apiHTTP, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	log := o.Log
	host := &hostReporter{client: direct, cred: cred, dataDir: o.DataDir, log: log}
	if err := host.heartbeat(ctx); err != nil {
		return err
	}
	lock := &Lock{Path: o.LockPath, StaleAfter: o.LockStaleAfter}
	recovered, err := recoverLock(ctx, direct, lock, cred, log)
	if err != nil {
		return fmt.Errorf("plan lock %s: %w", o.LockPath, err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// After a hand-over the agent runs again in the same process (ErrFollowed).
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{cred.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&agentv1.NodePlan{}: {Label: labels.SelectorFromSet(labels.Set{agentv1.HostLabel: cred.Host})},
			},
		},
		// The agent may only get these, never list or watch them.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &agentv1.Host{}}}},
	})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &planReconciler{
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		lock:      lock,
		log:       log,
		base:      runCtx,
		wake:      make(chan event.GenericEvent, 16),
		recovered: recovered,
		apiServer: &APIServerClient{Server: cred.Server, Client: apiHTTP},
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&agentv1.NodePlan{}).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		Named("nodeplan").
		// One plan at a time in this process; the lock file orders it with any other.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r); err != nil {
		return err
	}

	go func() {
		t := time.NewTicker(HeartbeatEvery(o.HeartbeatInterval))
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if err := host.heartbeat(runCtx); err != nil {
					var exit *ExitError
					if errors.As(err, &exit) {
						stop(err)
						return
					}
					log.Error(err, "heartbeat")
				}
			}
		}
	}()

	log.Info("watching plans", "host", cred.Host, "namespace", cred.Namespace, "lock", o.LockPath, "version", version.Version)
	err = mgr.Start(runCtx)
	r.stopAll()
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// recoverLock looks at the lock a previous agent left. A stale lock on a plan of this
// host that is still Executing its generation is taken over, so that plan resumes
// first, and returned (what it says goes into the plan's status); any other stale lock
// is released. Either way, what was left running of the stale holder's instruction is
// killed first, and an error returned when it does not die.
func recoverLock(ctx context.Context, c client.Client, lock *Lock, cred *Credential, log logr.Logger) (*LockInfo, error) {
	info, err := lock.Read()
	if err != nil || info == nil {
		return nil, err
	}
	if !lock.Stale(info) {
		log.Info("the plan lock is held by a live process; plans wait for it", "plan", info.Plan, "pid", info.PID)
		return nil, nil
	}
	namespace, name, _ := strings.Cut(info.Plan, "/")
	if namespace == cred.Namespace {
		var plan agentv1.NodePlan
		err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &plan)
		if err == nil && plan.Status.Phase == agentv1.PhaseExecuting && plan.Generation == info.Generation && plan.Status.ObservedGeneration == info.Generation {
			if err := lock.TakeOver(info); err != nil {
				return nil, err
			}
			log.Info("resuming the plan whose agent stopped while it held the lock", "plan", info.Plan, "stalePID", info.PID, "attempts", plan.Status.Attempts,
				"instruction", info.Instruction, "killedProcesses", info.KilledProcesses)
			return info, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	removed, err := lock.ReleaseStale()
	if removed != nil {
		log.Info("released a stale plan lock", "plan", removed.Plan, "stalePID", removed.PID, "killedProcesses", removed.KilledProcesses)
	}
	return nil, err
}

// hostReporter keeps the Host's status current and the agent's token fresh, and turns
// a refused credential into a clear, final error.
type hostReporter struct {
	client  client.Client
	cred    *Credential
	dataDir DataDir
	log     logr.Logger
}

func (h *hostReporter) revoked(err error) error {
	return refused("credential revoked: %s no longer accepts host %s's credential (%v). Its Host object was deleted or its ServiceAccount removed; "+
		"remove %s and register again with a new token from `provisioner hosts registration-command`",
		h.cred.Server, h.cred.Host, err, h.dataDir)
}

func (h *hostReporter) heartbeat(ctx context.Context) error {
	hostname, _ := os.Hostname()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"lastHeartbeatTime": metav1.Now(),
		"agentVersion":      version.Version,
		"hostname":          hostname,
		"os":                runtime.GOOS,
		"arch":              runtime.GOARCH,
	}})
	if err != nil {
		return err
	}
	host := &agentv1.Host{ObjectMeta: metav1.ObjectMeta{Name: h.cred.Host}}
	if err := h.client.Status().Patch(ctx, host, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return h.revoked(err)
		}
		return fmt.Errorf("host %s status: %w", h.cred.Host, err)
	}
	return h.renewToken(ctx)
}

// renewToken replaces the token when less than a third of its lifetime is left.
func (h *hostReporter) renewToken(ctx context.Context) error {
	raw, err := os.ReadFile(h.dataDir.TokenPath())
	if err != nil {
		return err
	}
	issued, expires, ok := tokenTimes(string(raw))
	if !ok || time.Now().Before(issued.Add(expires.Sub(issued)*2/3)) {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.cred.Namespace, Name: h.cred.ServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(expires.Sub(issued).Seconds()))}}
	if err := h.client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("renew the agent token: %w", err)
	}
	if err := writeFileAtomic(h.dataDir.TokenPath(), []byte(tr.Status.Token)); err != nil {
		return err
	}
	h.log.Info("renewed the agent token", "expires", tr.Status.ExpirationTimestamp.Time)
	return nil
}

// tokenTimes reads iat and exp from a JWT's payload, unverified: it is our own token,
// read only to know when to renew it.
func tokenTimes(token string) (issued, expires time.Time, ok bool) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return time.Time{}, time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	var claims struct {
		IssuedAt  int64 `json:"iat"`
		ExpiresAt int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.ExpiresAt <= claims.IssuedAt {
		return time.Time{}, time.Time{}, false
	}
	return time.Unix(claims.IssuedAt, 0), time.Unix(claims.ExpiresAt, 0), true
}

// planReconciler decides, for each plan event, whether to start, stop, or wait.
type planReconciler struct {
	client client.Client
	reader client.Reader
	lock   *Lock
	log    logr.Logger
	// base carries the agent's values (logger); executions are stopped through stopAll.
	base context.Context

	// wake re-queues the plans waiting on this agent's execution as soon as it ends
	// (instead of at their next one-second poll).
	wake chan event.GenericEvent

	// recovered is the stale lock Run took over at start, until its plan resumes.
	recovered *LockInfo

	// apiServer fetches contentRef URLs on the agent's API server with its credentials.
	apiServer *APIServerClient

	mu      sync.Mutex
	running *execution
}

type execution struct {
	key        types.NamespacedName
	generation int64
	cancel     context.CancelCauseFunc
	done       chan struct{}
}

// waitPoll is how often a plan waiting for the lock looks again.
const waitPoll = time.Second

func terminal(plan *agentv1.NodePlan) bool {
	if plan.Status.ObservedGeneration != plan.Generation {
		return false
	}
	switch plan.Status.Phase {
	case agentv1.PhaseApplied, agentv1.PhaseFailed, agentv1.PhaseCancelled:
		return true
	}
	return false
}

func (r *planReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()

	var plan agentv1.NodePlan
	if err := r.client.Get(ctx, req.NamespacedName, &plan); err != nil {
		if apierrors.IsNotFound(err) && running != nil && running.key == req.NamespacedName {
			running.cancel(errDeleted)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cancelRequested := plan.Annotations[agentv1.CancelAnnotation] == "true"
	if running != nil && running.key == req.NamespacedName {
		switch {
		case cancelRequested:
			running.cancel(errCancelled)
		case plan.Generation != running.generation:
			running.cancel(errSuperseded)
		}
		return ctrl.Result{}, nil
	}
	if terminal(&plan) {
		return ctrl.Result{}, nil
	}
	if plan.Status.Phase == agentv1.PhaseExecuting && plan.Status.ObservedGeneration == plan.Generation {
		// Executing with no execution here: an earlier agent process stopped during it, or
		// this one just finished it and the cache has not seen the outcome yet (which it
		// wrote before releasing the lock). Only the API server's copy tells them apart;
		// without this read a plan that had just been Applied ran again and was failed.
		if err := r.reader.Get(ctx, req.NamespacedName, &plan); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if terminal(&plan) {
			return ctrl.Result{}, nil
		}
	}
	key := req.String()
	if cancelRequested {
		if err := r.lock.Release(key); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.reporter(req.NamespacedName)(ctx, func(s *agentv1.NodePlanStatus) {
			s.ObservedGeneration = plan.Generation
			s.Phase = agentv1.PhaseCancelled
			s.Message = "cancelled by the " + agentv1.CancelAnnotation + " annotation before it ran"
			s.CompletionTime = &metav1.Time{Time: time.Now()}
			s.LockHolder = ""
		})
	}
	if running != nil {
		return ctrl.Result{RequeueAfter: waitPoll}, r.waiting(ctx, &plan, running.key.String()+" (this agent)")
	}
	acquired, holder, replaced, err := r.lock.Acquire(key, plan.Generation)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("plan lock %s: %w", r.lock.Path, err)
	}
	if !acquired {
		return ctrl.Result{RequeueAfter: waitPoll}, r.waiting(ctx, &plan, fmt.Sprintf("%s (pid %d)", holder.Plan, holder.PID))
	}
	if replaced != nil {
		r.log.Info("took over a stale plan lock", "plan", key, "stalePlan", replaced.Plan, "stalePID", replaced.PID)
	}
	var prior int32
	var interrupted *agentv1.PlanInterruption
	if plan.Status.Phase == agentv1.PhaseExecuting && plan.Status.ObservedGeneration == plan.Generation {
		// The previous agent stopped during this plan: its attempts count, the one it was
		// in included, and the status says so.
		prior = plan.Status.Attempts
		interrupted = r.interruption(key, prior, replaced)
	}
	r.start(&plan, prior, interrupted)
	return ctrl.Result{}, nil
}

// interruption describes the attempt an earlier agent process stopped during, from the
// lock it left (taken over at start, or just now), when it was this plan's.
func (r *planReconciler) interruption(key string, attempt int32, replaced *LockInfo) *agentv1.PlanInterruption {
	r.mu.Lock()
	stale := r.recovered
	if stale != nil && stale.Plan == key {
		r.recovered = nil
	} else {
		stale = nil
	}
	r.mu.Unlock()
	if stale == nil && replaced != nil && replaced.Plan == key {
		stale = replaced
	}
	in := &agentv1.PlanInterruption{Attempt: attempt, ResumedTime: metav1.Now()}
	if stale == nil {
		in.Message = fmt.Sprintf("attempt %d was interrupted: the agent process running it stopped", attempt)
		return in
	}
	in.AgentPID, in.Instruction, in.KilledProcesses = int32(stale.PID), stale.Instruction, int32(stale.KilledProcesses)
	during := "between instructions"
	if stale.Instruction != "" {
		during = "during instruction " + stale.Instruction
	}
	left := "none of its processes was left running"
	if stale.KilledProcesses > 0 {
		left = fmt.Sprintf("%d of its processes were still running and were killed before the plan went on", stale.KilledProcesses)
	}
	in.Message = fmt.Sprintf("attempt %d was interrupted: the agent (pid %d) stopped %s; %s", attempt, stale.PID, during, left)
	return in
}

// waiting records that plan waits for the lock (written only when something changed).
func (r *planReconciler) waiting(ctx context.Context, plan *agentv1.NodePlan, holder string) error {
	message := "waiting for the node's plan lock, held by " + holder
	if plan.Status.Phase == agentv1.PhasePending && plan.Status.LockHolder == holder && plan.Status.ObservedGeneration == plan.Generation {
		return nil
	}
	return r.reporter(client.ObjectKeyFromObject(plan))(ctx, func(s *agentv1.NodePlanStatus) {
		s.ObservedGeneration = plan.Generation
		s.Phase = agentv1.PhasePending
		s.LockHolder = holder
		s.Message = message
		setCondition(s, plan.Generation, agentv1.ConditionLockAcquired, false, "Waiting", message)
	})
}

func (r *planReconciler) start(plan *agentv1.NodePlan, prior int32, interrupted *agentv1.PlanInterruption) {
	// Not a child of the agent's context: stopping the agent must stop the execution
	// with errStopping (keep it Executing, to resume), not fail it.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.base))
	key := client.ObjectKeyFromObject(plan)
	exe := &execution{key: key, generation: plan.Generation, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.running = exe
	r.mu.Unlock()
	lockKey := key.String()
	log := r.log.WithValues("plan", lockKey, "generation", plan.Generation)
	executor := &Executor{Reader: r.reader, Report: r.reporter(key), Lock: r.lock, Log: log, APIServer: r.apiServer}

	go func() {
		defer close(exe.done)
		defer cancel(nil)
		heartbeatDone := make(chan struct{})
		go func() {
			t := time.NewTicker(max(r.lock.StaleAfter/4, 100*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-heartbeatDone:
					return
				case <-t.C:
					if err := r.lock.Update(lockKey, func(*LockInfo) {}); err != nil {
						log.Error(err, "lock heartbeat")
					}
				}
			}
		}()
		log.Info("executing", "priorAttempts", prior)
		if interrupted != nil {
			log.Info("resuming an interrupted plan", "message", interrupted.Message)
		}
		outcome := executor.Execute(ctx, plan.DeepCopy(), prior, interrupted)
		log.Info("execution ended", "phase", outcome.Phase, "message", outcome.Message)
		// The lock stays ours, heartbeat included, until the outcome is written.
		release := !outcome.Stopped && r.finish(log, key, plan.Generation, outcome)
		close(heartbeatDone)
		if release {
			if err := r.lock.Release(lockKey); err != nil {
				log.Error(err, "release the plan lock")
			}
		}
		// A stopping agent keeps its lock: the next start finds it stale and resumes.
		r.mu.Lock()
		r.running = nil
		r.mu.Unlock()
		if !outcome.Stopped {
			r.wakeWaiting(key.Namespace)
		}
	}()
}

// finish writes the execution's last progress and its outcome, retried until it lands or
// the plan is gone (then the lock may be released: true), or the agent stops (false: the
// lock stays, so the next start finds this plan and settles it). Releasing before the
// write would leave a plan Executing with no lock, and the next start would run it again.
func (r *planReconciler) finish(log logr.Logger, key types.NamespacedName, generation int64, outcome Outcome) bool {
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.base), 30*time.Second)
		err := r.reporter(key)(ctx, func(s *agentv1.NodePlanStatus) {
			inOrder(outcome.Unwritten)(s)
			s.Phase = outcome.Phase
			s.Message = outcome.Message
			s.LockHolder = ""
			if !outcome.Superseded {
				s.CompletionTime = &metav1.Time{Time: time.Now()}
			}
			setCondition(s, generation, agentv1.ConditionLockAcquired, false, "Released", "the plan ended and released the node's plan lock")
		})
		cancel()
		if err == nil || apierrors.IsNotFound(err) {
			return true
		}
		log.Error(err, "writing the plan's outcome; retrying", "backoff", backoff.String())
		select {
		case <-r.base.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// wakeWaiting queues every plan of the namespace that has not ended.
func (r *planReconciler) wakeWaiting(namespace string) {
	var plans agentv1.NodePlanList
	if err := r.client.List(context.Background(), &plans, client.InNamespace(namespace)); err != nil {
		return
	}
	for i := range plans.Items {
		if plan := &plans.Items[i]; !terminal(plan) {
			select {
			case r.wake <- event.GenericEvent{Object: plan}:
			default: // the queue is full; the plan's own poll picks it up
			}
		}
	}
}

// stopAll stops the running execution (it stays Executing, to be resumed) and waits.
func (r *planReconciler) stopAll() {
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running != nil {
		running.cancel(errStopping)
		<-running.done
	}
}

func (r *planReconciler) reporter(key types.NamespacedName) Reporter {
	return statusWriter(r.reader, r.client, key)
}

// statusWriter writes one plan's status. The agent is the only writer of a plan's status,
// so a write starts from the plan its last write returned: one request (the update), not a
// read and then the update, on the critical path of every instruction. A conflict (the plan
// changed since: its spec, its metadata, or it was made anew) reads the plan afresh and
// tries again; any other failure forgets the plan, so the next write reads it.
func statusWriter(reader client.Reader, writer client.Client, key types.NamespacedName) Reporter {
	var mu sync.Mutex
	var last *agentv1.NodePlan
	return func(ctx context.Context, mutate func(*agentv1.NodePlanStatus)) error {
		mu.Lock()
		defer mu.Unlock()
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			plan := last
			last = nil
			if plan == nil {
				plan = &agentv1.NodePlan{}
				if err := reader.Get(ctx, key, plan); err != nil {
					return err
				}
			}
			mutate(&plan.Status)
			if err := writer.Status().Update(ctx, plan); err != nil {
				return err
			}
			last = plan
			return nil
		})
	}
}
