package agent

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// recordedStatus is a plan's status behind a Reporter that keeps what each write left.
type recordedStatus struct {
	mu     sync.Mutex
	status agentv1.NodePlanStatus
	// writes is the message and the instructions' names after each write that landed.
	writes []string
	// refuse is the 1-based number of the write to refuse (0: none).
	refuse, tried int
	// afterWrite runs after each write that landed, with the status it left.
	afterWrite func(agentv1.NodePlanStatus)
}

func (r *recordedStatus) report(_ context.Context, mutate func(*agentv1.NodePlanStatus)) error {
	r.mu.Lock()
	r.tried++
	if r.tried == r.refuse {
		r.mu.Unlock()
		return errors.New("refused")
	}
	next := *r.status.DeepCopy()
	mutate(&next)
	r.status = next
	r.writes = append(r.writes, describeProgress(next))
	after := r.afterWrite
	r.mu.Unlock()
	if after != nil {
		after(next)
	}
	return nil
}

func describeProgress(s agentv1.NodePlanStatus) string {
	names := ""
	for _, i := range s.Instructions {
		names += " " + i.Name
	}
	return s.Message + " |" + names
}

func executorOnRecord(t *testing.T, r *recordedStatus) *Executor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Executor{Report: r.report, Log: logr.Discard(), Self: self}
}

func planOf(instructions ...agentv1.Instruction) *agentv1.NodePlan {
	plan := &agentv1.NodePlan{Spec: agentv1.NodePlanSpec{Instructions: instructions}}
	plan.Namespace, plan.Name, plan.Generation = "host-a", "bootstrap", 1
	return plan
}

// Only what must be on record before the agent goes on is written at once, each write
// carrying what came before it: the attempt, then each instruction as it starts (with the
// results of those before it). The last result and the instructions' condition go out
// with the outcome.
func TestExecuteWritesEachInstructionBeforeItRunsAndLeavesTheRestToTheOutcome(t *testing.T) {
	r := &recordedStatus{}
	plan := planOf(agentv1.Instruction{Name: "one", Command: "/bin/true"}, agentv1.Instruction{Name: "two", Command: "/bin/true"})
	out := executorOnRecord(t, r).Execute(context.Background(), plan, 0, nil)
	if out.Phase != agentv1.PhaseApplied {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"attempt 1 |", "attempt 1: running one |", "attempt 1: running two | one"}
	if !reflect.DeepEqual(r.writes, want) {
		t.Fatalf("writes during Execute:\n%q\nwant\n%q", r.writes, want)
	}
	s := r.status.DeepCopy()
	for _, mutate := range out.Unwritten {
		mutate(s)
	}
	if got := describeProgress(*s); got != "attempt 1: running two | one two" {
		t.Errorf("with the outcome's changes: %q; want both results", got)
	}
	if c := meta.FindStatusCondition(s.Conditions, agentv1.ConditionInstructionsSucceeded); c == nil || c.Reason != "Succeeded" {
		t.Errorf("InstructionsSucceeded with the outcome's changes: %+v", c)
	}
}

// A refused write loses nothing: its changes go out, in order, with the next one.
func TestARefusedProgressWriteIsCarriedByTheNext(t *testing.T) {
	r := &recordedStatus{refuse: 2}
	plan := planOf(agentv1.Instruction{Name: "one", Command: "/bin/true"}, agentv1.Instruction{Name: "two", Command: "/bin/true"})
	if out := executorOnRecord(t, r).Execute(context.Background(), plan, 0, nil); out.Phase != agentv1.PhaseApplied {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{"attempt 1 |", "attempt 1: running two | one"}
	if !reflect.DeepEqual(r.writes, want) || r.tried != 3 {
		t.Fatalf("writes that landed: %q of %d tried; want %q of 3", r.writes, r.tried, want)
	}
}

// An agent that stops during a plan writes what it recorded itself, since no outcome
// follows: the next start finds the instruction it stopped in, and its result.
func TestAStoppingAgentWritesItsProgressItself(t *testing.T) {
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	r := &recordedStatus{afterWrite: func(s agentv1.NodePlanStatus) {
		if s.Message == "attempt 1: running slow" {
			stop(errStopping)
		}
	}}
	plan := planOf(agentv1.Instruction{Name: "one", Command: "/bin/true"}, agentv1.Instruction{Name: "slow", Command: "sleep", Args: []string{"30"}})
	out := executorOnRecord(t, r).Execute(ctx, plan, 0, nil)
	if !out.Stopped || len(out.Unwritten) != 0 {
		t.Fatalf("outcome %+v; want Stopped with nothing left unwritten", out)
	}
	if got := describeProgress(r.status); got != "attempt 1: running slow | one slow" {
		t.Errorf("status after the stop: %q", got)
	}
}
