package v1alpha1

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePlanSpec is what the agent on one host does: preflight checks, then files, then
// instructions, then probes until they are healthy. A failed attempt is retried as
// retryStrategy says, within executionTimeout.
// +kubebuilder:validation:XValidation:rule="self.?files.orValue([]).size() + self.?instructions.orValue([]).size() + self.?probes.orValue([]).size() > 0",message="a plan needs at least one file, instruction or probe"
type NodePlanSpec struct {
	// Files to write or delete, in order, before the instructions run.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Files []PlanFile `json:"files,omitempty"`

	// Instructions run in order; each must exit 0 for the next to run.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=name
	Instructions []Instruction `json:"instructions,omitempty"`

	// Probes polled after the instructions; the plan is Applied when every probe is healthy.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Probes []NamedProbe `json:"probes,omitempty"`

	// PreflightChecks are evaluated once at the start of every attempt. A failing
	// required check fails the attempt before anything is written; a failing optional
	// one is recorded in the PreflightPassed condition and the attempt goes on.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	PreflightChecks []PreflightCheck `json:"preflightChecks,omitempty"`

	// RetryStrategy says how often and how late a failed attempt is retried.
	// Default: one attempt, no retry.
	// +optional
	RetryStrategy *RetryStrategy `json:"retryStrategy,omitempty"`

	// ExecutionTimeout bounds the whole execution, every attempt and backoff included;
	// when it passes, the running instruction is killed and the plan fails.
	// Default: 30m.
	// +optional
	// +kubebuilder:default="30m"
	ExecutionTimeout *metav1.Duration `json:"executionTimeout,omitempty"`
}

// PlanFile is one file the plan writes, or deletes.
// +kubebuilder:validation:XValidation:rule="self.?delete.orValue(false) ? !has(self.content) && !has(self.contentRef) : (has(self.content) != has(self.contentRef))",message="set exactly one of content and contentRef, or neither with delete: true"
// +kubebuilder:validation:XValidation:rule="!has(self.digest) || has(self.content)",message="digest is for inline content; a contentRef carries its own digest"
type PlanFile struct {
	// Path is the file's absolute path on the host.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`

	// Content is the file's content, inline.
	// +optional
	Content *string `json:"content,omitempty"`

	// Encoding of content: "" (as is) or "base64". Default: "".
	// +optional
	// +kubebuilder:validation:Enum="";base64
	Encoding string `json:"encoding,omitempty"`

	// Digest, when set, is the sha256 of the (decoded) inline content; the webhook and
	// the agent refuse content that does not match.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest,omitempty"`

	// ContentRef takes the content from a Secret, a ConfigMap or a URL, checked against a digest.
	// +optional
	ContentRef *ContentRef `json:"contentRef,omitempty"`

	// Mode is the file's permission bits in octal. Default: "0644".
	// +optional
	// +kubebuilder:default="0644"
	// +kubebuilder:validation:Pattern=`^0?[0-7]{3}$`
	Mode string `json:"mode,omitempty"`

	// Owner is "user[:group]", by name or numeric id. Default: the agent's user.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+(:[A-Za-z0-9._-]+)?$`
	Owner string `json:"owner,omitempty"`

	// Delete removes the file instead of writing it (a missing file is not an error).
	// +optional
	Delete bool `json:"delete,omitempty"`
}

// ContentRef points at a file's content outside the plan. Exactly one source is set.
// +kubebuilder:validation:XValidation:rule="[has(self.secretKeyRef), has(self.configMapKeyRef), has(self.url)].filter(x, x).size() == 1",message="set exactly one of secretKeyRef, configMapKeyRef and url"
type ContentRef struct {
	// SecretKeyRef names a key of a Secret in the plan's namespace.
	// +optional
	SecretKeyRef *KeyReference `json:"secretKeyRef,omitempty"`

	// ConfigMapKeyRef names a key of a ConfigMap in the plan's namespace (data or binaryData).
	// +optional
	ConfigMapKeyRef *KeyReference `json:"configMapKeyRef,omitempty"`

	// URL is fetched with HTTP(S) GET (system trust roots) when the file is written.
	// +optional
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url,omitempty"`

	// Digest is the content's sha256; content that does not match is refused.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest"`
}

// KeyReference names one key of a Secret or ConfigMap in the plan's namespace.
type KeyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Instruction is one command the agent runs.
type Instruction struct {
	// Name identifies the instruction in status.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Command is the executable, an absolute path or a name looked up in PATH.
	// +kubebuilder:validation:MinLength=1
	Command string `json:"command"`

	// Args are passed to the command as they are, with no shell.
	// +optional
	Args []string `json:"args,omitempty"`

	// Env is added to the agent's environment for this command.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []EnvVar `json:"env,omitempty"`

	// WorkingDir is where the command runs. Default: "/".
	// +optional
	// +kubebuilder:validation:Pattern=`^/`
	WorkingDir string `json:"workingDir,omitempty"`

	// Timeout kills the command (its whole process group) when it runs longer. Default: 10m.
	// +optional
	// +kubebuilder:default="10m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// SaveOutput keeps the last 4 KiB of the command's combined stdout and stderr in
	// status.instructions. Default: false (only the exit code is kept).
	// +optional
	SaveOutput bool `json:"saveOutput,omitempty"`
}

// EnvVar is one environment variable of an instruction.
type EnvVar struct {
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// +optional
	Value string `json:"value,omitempty"`
}

// Probe is one health check: an HTTP(S) GET or a file's existence. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.httpGet) != has(self.fileExists)",message="set exactly one of httpGet and fileExists"
type Probe struct {
	// HTTPGet succeeds on a 2xx or 3xx answer.
	// +optional
	HTTPGet *HTTPGetProbe `json:"httpGet,omitempty"`

	// FileExists succeeds when the path exists.
	// +optional
	FileExists *FileExistsProbe `json:"fileExists,omitempty"`

	// PeriodSeconds between two evaluations. Default: 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`

	// TimeoutSeconds for one evaluation. Default: 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// SuccessThreshold is how many successes in a row make the probe healthy. Default: 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	SuccessThreshold int32 `json:"successThreshold,omitempty"`

	// FailureThreshold is how many failures in a row fail the attempt. Default: 60.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// NamedProbe is a probe of the plan, named for status.probeStatuses.
type NamedProbe struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name  string `json:"name"`
	Probe `json:",inline"`
}

// HTTPGetProbe is an HTTP(S) GET.
// +kubebuilder:validation:XValidation:rule="!(has(self.caSecretRef) && has(self.caConfigMapRef))",message="set at most one of caSecretRef and caConfigMapRef"
type HTTPGetProbe struct {
	// URL to GET.
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// CASecretRef names the PEM CA bundle (in a Secret of the plan's namespace) that an
	// https URL's certificate must chain to. Default: the system's trust roots.
	// +optional
	CASecretRef *KeyReference `json:"caSecretRef,omitempty"`

	// CAConfigMapRef is CASecretRef's ConfigMap twin.
	// +optional
	CAConfigMapRef *KeyReference `json:"caConfigMapRef,omitempty"`
}

// FileExistsProbe checks that a path exists.
type FileExistsProbe struct {
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
}

// PreflightCheck is a probe evaluated once before an attempt writes anything.
type PreflightCheck struct {
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Probe to evaluate; its period and thresholds are ignored (one evaluation).
	Probe Probe `json:"probe"`

	// Required checks fail the attempt when they fail. Default: false.
	// +optional
	Required bool `json:"required,omitempty"`
}

// RetryStrategy: attempt n+1 starts initialBackoff * backoffMultiplier^(n-1) after
// attempt n failed, capped at maxBackoff, while n < maxAttempts.
type RetryStrategy struct {
	// MaxAttempts, the first included. Default: 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// InitialBackoff before the second attempt. Default: 1s.
	// +optional
	// +kubebuilder:default="1s"
	InitialBackoff *metav1.Duration `json:"initialBackoff,omitempty"`

	// BackoffMultiplier, a decimal number >= 1 (a string: CRDs avoid floats). Default: "2".
	// +optional
	// +kubebuilder:default="2"
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]*(\.[0-9]+)?$`
	BackoffMultiplier string `json:"backoffMultiplier,omitempty"`

	// MaxBackoff caps the wait between attempts. Default: 1m.
	// +optional
	// +kubebuilder:default="1m"
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

// NodePlanPhase is where a plan's execution stands.
// +kubebuilder:validation:Enum=Pending;Executing;Applied;Failed;Cancelled
type NodePlanPhase string

const (
	// PhasePending: not started for the current generation (waiting for the agent or the lock).
	PhasePending NodePlanPhase = "Pending"
	// PhaseExecuting: the agent holds the lock and is running an attempt or backing off.
	PhaseExecuting NodePlanPhase = "Executing"
	// PhaseApplied: an attempt succeeded and every probe was healthy.
	PhaseApplied NodePlanPhase = "Applied"
	// PhaseFailed: every attempt failed, or the execution timed out.
	PhaseFailed NodePlanPhase = "Failed"
	// PhaseCancelled: the cancel annotation stopped the plan.
	PhaseCancelled NodePlanPhase = "Cancelled"
)

// Condition types of a NodePlan.
const (
	// ConditionLockAcquired: the agent holds the node's plan lock for this plan.
	ConditionLockAcquired = "LockAcquired"
	// ConditionPreflightPassed: the last attempt's preflight checks.
	ConditionPreflightPassed = "PreflightPassed"
	// ConditionFilesApplied: the last attempt's files.
	ConditionFilesApplied = "FilesApplied"
	// ConditionInstructionsSucceeded: the last attempt's instructions.
	ConditionInstructionsSucceeded = "InstructionsSucceeded"
	// ConditionProbesHealthy: the last attempt's probes.
	ConditionProbesHealthy = "ProbesHealthy"
)

// NodePlanStatus is written by the agent only.
type NodePlanStatus struct {
	// ObservedGeneration is the spec generation the phase describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	Phase NodePlanPhase `json:"phase,omitempty"`

	// Message says why the plan failed, was cancelled, or is waiting.
	// +optional
	Message string `json:"message,omitempty"`

	// Attempts made for the observed generation.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ProbeStatuses of the last attempt.
	// +optional
	// +listType=map
	// +listMapKey=name
	ProbeStatuses []ProbeStatus `json:"probeStatuses,omitempty"`

	// Instructions' results in the last attempt, in order.
	// +optional
	// +listType=map
	// +listMapKey=name
	Instructions []InstructionStatus `json:"instructions,omitempty"`

	// StartTime of the execution of the observed generation.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime when it ended Applied, Failed or Cancelled.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// LockHolder is the plan ("namespace/name") that held the node's lock when this plan
	// last looked: itself while it executes, another plan while this one waits.
	// +optional
	LockHolder string `json:"lockHolder,omitempty"`

	// Interruptions are the attempts of the observed generation that an agent process
	// did not see to their end (it was killed or stopped during them). Each counts as an
	// attempt; the next agent process killed what was left of the interrupted
	// instruction before it went on.
	// +optional
	// +listType=atomic
	Interruptions []PlanInterruption `json:"interruptions,omitempty"`
}

// PlanInterruption is an attempt whose agent process stopped during it.
type PlanInterruption struct {
	// Attempt that was interrupted.
	Attempt int32 `json:"attempt"`
	// Instruction that was running, empty when the agent stopped between instructions.
	// +optional
	Instruction string `json:"instruction,omitempty"`
	// AgentPID of the agent process that stopped, 0 when unknown.
	// +optional
	AgentPID int32 `json:"agentPID,omitempty"`
	// KilledProcesses: how many of the instruction's processes were still running when
	// the next agent process started, and were killed by it before the plan went on.
	// +optional
	KilledProcesses int32 `json:"killedProcesses,omitempty"`
	// ResumedTime: when the next agent process took the plan up again.
	ResumedTime metav1.Time `json:"resumedTime"`
	// Message says what happened, in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// ProbeStatus is one probe's state.
type ProbeStatus struct {
	Name string `json:"name"`
	// +optional
	Healthy bool `json:"healthy"`
	// +optional
	SuccessCount int32 `json:"successCount,omitempty"`
	// +optional
	FailureCount int32 `json:"failureCount,omitempty"`
	// LastMessage from the last failed evaluation.
	// +optional
	LastMessage string `json:"lastMessage,omitempty"`
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
}

// InstructionStatus is one instruction's result.
type InstructionStatus struct {
	Name string `json:"name"`
	// ExitCode, or -1 when the command could not start or was killed.
	ExitCode int32 `json:"exitCode"`
	// Output: the last 4 KiB of stdout and stderr, when the instruction saves output.
	// +optional
	Output string `json:"output,omitempty"`
	// Attempt that produced this result.
	Attempt int32 `json:"attempt"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// NodePlan is a set of files, instructions and probes for one host's agent.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=provisioner
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.metadata.labels.agent\.provisioner\.dev/host`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodePlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodePlanSpec   `json:"spec,omitempty"`
	Status NodePlanStatus `json:"status,omitempty"`
}

// NodePlanList is a list of NodePlans.
// +kubebuilder:object:root=true
type NodePlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePlan `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &NodePlan{}, &NodePlanList{})
}

// Digest is the "sha256:<hex>" digest of content, as plans write it.
func Digest(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// InlineContent is a file's inline content, decoded.
func (f *PlanFile) InlineContent() ([]byte, error) {
	if f.Content == nil {
		return nil, nil
	}
	if f.Encoding == "base64" {
		return base64.StdEncoding.DecodeString(*f.Content)
	}
	return []byte(*f.Content), nil
}
