//go:build measure

package integration

// Figures for the issue, not a pass/fail test: build with -tags measure and run
//
//	KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test -tags measure -run Measure -v ./test/integration/

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

const clockTicks = 100 // USER_HZ on Linux

func TestMeasurePlanLatencyAndIdleFootprint(t *testing.T) {
	const hosts = 10
	nodes := make([]*node, hosts)
	for i := range nodes {
		nodes[i] = startNode(t, fmt.Sprintf("measure-%d", i))
	}
	dir := t.TempDir()
	oneFileOneInstruction := func(i int) agentv1.NodePlanSpec {
		path := filepath.Join(dir, fmt.Sprintf("f-%d-%d", i, time.Now().UnixNano()))
		return agentv1.NodePlanSpec{
			Files:        []agentv1.PlanFile{{Path: path, Content: ptr.To("hello\n"), Mode: "0600"}},
			Instructions: []agentv1.Instruction{{Name: "cat", Command: "cat", Args: []string{path}, SaveOutput: true}},
		}
	}
	applied := func(plan *agentv1.NodePlan) time.Time {
		got := &agentv1.NodePlan{}
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if err := admin.Get(context.Background(), client.ObjectKeyFromObject(plan), got); err == nil && got.Status.Phase == agentv1.PhaseApplied {
				return time.Now()
			}
			time.Sleep(25 * time.Millisecond)
		}
		status, _ := json.MarshalIndent(got.Status, "", "  ")
		for _, n := range nodes {
			if n.host == plan.Labels[agentv1.HostLabel] {
				t.Errorf("plan %s/%s not Applied within 60s; status %s\nagent log:\n%s", plan.Namespace, plan.Name, status, n.agent.stderr.String())
			}
		}
		return time.Now()
	}

	// Warm up every agent (first reconcile, first status write).
	for i, n := range nodes {
		applied(n.apply(t, "warmup", oneFileOneInstruction(i)))
	}

	var single []time.Duration
	for run := 0; run < 5; run++ {
		start := time.Now()
		plan := nodes[0].apply(t, fmt.Sprintf("single-%d", run), oneFileOneInstruction(0))
		single = append(single, applied(plan).Sub(start))
	}
	var all []time.Duration
	for run := 0; run < 3; run++ {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var last time.Time
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := applied(n.apply(t, fmt.Sprintf("fleet-%d", run), oneFileOneInstruction(i)))
				mu.Lock()
				if at.After(last) {
					last = at
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		all = append(all, last.Sub(start))
	}
	t.Logf("apply -> Applied, 1 file + 1 instruction, 1 host: median %s of %v", median(single), single)
	t.Logf("apply -> Applied, 1 file + 1 instruction, %d hosts at once (last host): median %s of %v", hosts, median(all), all)

	// Idle: every agent watching, heartbeats every 500ms in these tests (30s by default).
	pid := nodes[0].agent.cmd.Process.Pid
	time.Sleep(5 * time.Second)
	cpu0, _ := procCPU(pid)
	const window = 30 * time.Second
	time.Sleep(window)
	cpu1, rss := procCPU(pid)
	t.Logf("agent idle (watching, heartbeat 500ms): RSS %.1f MiB, CPU %.2f%% of one core over %s",
		float64(rss)/(1<<20), 100*float64(cpu1-cpu0)/clockTicks/window.Seconds(), window)
	if exe, err := os.Stat(agentBin); err == nil {
		t.Logf("agent binary (test build, not stripped): %.1f MiB", float64(exe.Size())/(1<<20))
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// procCPU returns utime+stime in clock ticks and the RSS in bytes.
func procCPU(pid int) (ticks int64, rss int64) {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	return utime + stime, pages * int64(os.Getpagesize())
}
