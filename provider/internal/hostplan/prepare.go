package hostplan

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
	infrav1 "provisioner.dev/provider/api/infrastructure/v1alpha1"
)

// checkIPForward is the prepare plan's first instruction: a preflight check a file probe
// cannot make (the value of a sysctl). kubeadm's own preflight would fail on it later and
// less clearly. The bootstrap plan, which runs only after the prepare plan is Applied, does
// not check again: kubeadm does, and each instruction of a bootstrap plan (a status write
// before it, a process) is on the way to the node.
var checkIPForward = agentv1.Instruction{
	Name:       "check-ip-forward",
	Command:    "/bin/sh",
	Args:       []string{"-c", `v=$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null); [ "$v" = 1 ] || { echo "net.ipv4.ip_forward is '$v'; kubeadm and pod networking need 1" >&2; exit 1; }`},
	SaveOutput: true,
}

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
