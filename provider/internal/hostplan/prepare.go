package hostplan

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// Prepare is the prepare plan of a claimed Host, written before the Machine has bootstrap
// data: the preflight checks and the ip_forward check, the artifacts downloaded (each
// checked against its digest), then the HostMachine's prepareCommands, each with
// /bin/sh -c. What it does must not depend on the bootstrap data; the bootstrap plan runs
// after it.
func Prepare(artifacts []infrav1.Artifact, commands []string) agentv1.NodePlanSpec {
	spec := agentv1.NodePlanSpec{
		PreflightChecks:  append([]agentv1.PreflightCheck(nil), PreflightChecks...),
		ExecutionTimeout: &metav1.Duration{Duration: executionTimeout},
		// As the bootstrap plan: an attempt cut short by the agent's death runs again
		// (downloads are checked by digest, and image imports may run twice).
		RetryStrategy: &agentv1.RetryStrategy{MaxAttempts: 3, InitialBackoff: &metav1.Duration{Duration: 5 * time.Second}},
		Instructions:  []agentv1.Instruction{checkIPForward},
	}
	for _, a := range artifacts {
		spec.Files = append(spec.Files, agentv1.PlanFile{
			Path:       a.Path,
			ContentRef: &agentv1.ContentRef{URL: a.URL, Digest: a.Digest},
			Mode:       a.Mode,
		})
	}
	for i, line := range commands {
		spec.Instructions = append(spec.Instructions, agentv1.Instruction{
			Name:       strings.Replace(instructionName(i, line), "cmd-", "prepare-", 1),
			Command:    "/bin/sh",
			Args:       []string{"-c", line},
			Timeout:    &metav1.Duration{Duration: instructionTimeout},
			SaveOutput: true,
		})
	}
	return spec
}

// PrepareName is the name of a HostMachine's prepare plan (its bootstrap plan has the
// HostMachine's name, its reset plan ResetName's).
func PrepareName(machine string) string { return fmt.Sprintf("%s-prepare", machine) }
