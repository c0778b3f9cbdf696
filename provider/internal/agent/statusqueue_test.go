package agent

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// fakeStatus is a plan status behind a Reporter that counts writes and can hold one.
type fakeStatus struct {
	mu     sync.Mutex
	status agentv1.NodePlanStatus
	writes int
	// hold, when set, blocks the next write until it is closed; entered is closed when
	// that write begins.
	hold, entered chan struct{}
	fail          bool
}

func (f *fakeStatus) report(ctx context.Context, mutate func(*agentv1.NodePlanStatus)) error {
	f.mu.Lock()
	hold, entered := f.hold, f.entered
	f.hold = nil
	f.mu.Unlock()
	if hold != nil {
		close(entered)
		<-hold
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.fail {
		return errors.New("refused")
	}
	mutate(&f.status)
	return nil
}

func appendMessage(m string) func(*agentv1.NodePlanStatus) {
	return func(s *agentv1.NodePlanStatus) { s.Message += m }
}

// Changes land in the order they were made; those made while a write is in flight go out
// together in the next write; flush returns only when all of them are written.
func TestStatusQueueWritesInOrderAndBatchesWhileAWriteIsInFlight(t *testing.T) {
	hold, entered := make(chan struct{}), make(chan struct{})
	f := &fakeStatus{hold: hold, entered: entered}
	q := newStatusQueue(context.Background(), f.report, logr.Discard())
	q.add(appendMessage("a"))
	<-entered
	for _, m := range []string{"b", "c", "d"} {
		q.add(appendMessage(m))
	}
	close(hold)
	q.flush()
	if f.status.Message != "abcd" || f.writes != 2 {
		t.Fatalf("after flush: message %q in %d writes; want \"abcd\" in 2 (a, then b-d together)", f.status.Message, f.writes)
	}
	q.add(appendMessage("e"))
	q.flush()
	if f.status.Message != "abcde" || f.writes != 3 {
		t.Fatalf("a change after a flush: message %q in %d writes; want \"abcde\" in 3", f.status.Message, f.writes)
	}
}

// A change queued as the execution's context is cancelled still lands (the last word of a
// cancelled or timed-out plan), and a failed write does not stop the queue.
func TestStatusQueueWritesAfterCancellationAndGoesOnAfterAFailure(t *testing.T) {
	f := &fakeStatus{fail: true}
	ctx, cancel := context.WithCancel(context.Background())
	q := newStatusQueue(ctx, f.report, logr.Discard())
	q.add(appendMessage("lost"))
	q.flush()
	f.fail = false
	cancel()
	q.add(appendMessage("kept"))
	q.flush()
	if f.status.Message != "kept" || f.writes != 2 {
		t.Fatalf("message %q in %d writes; want \"kept\" written after the refused one", f.status.Message, f.writes)
	}
}

// Execute's progress goes through the queue and is all written when Execute returns: the
// runner writes the outcome right after.
func TestExecuteHasWrittenEveryChangeWhenItReturns(t *testing.T) {
	f := &fakeStatus{}
	e := &Executor{Report: f.report, Log: logr.Discard(), Self: "/bin/true"}
	plan := &agentv1.NodePlan{Spec: agentv1.NodePlanSpec{Instructions: []agentv1.Instruction{{Name: "one", Command: "/bin/true"}, {Name: "two", Command: "/bin/true"}}}}
	plan.Namespace, plan.Name, plan.Generation = "host-a", "p", 1
	if out := e.Execute(context.Background(), plan, 0, nil); out.Phase != agentv1.PhaseApplied {
		t.Fatalf("outcome %+v", out)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	names := []string{}
	for _, i := range f.status.Instructions {
		names = append(names, i.Name)
	}
	if !reflect.DeepEqual(names, []string{"one", "two"}) || f.status.Phase != agentv1.PhaseExecuting || f.status.ObservedGeneration != 1 {
		t.Fatalf("status when Execute returned: instructions %v, phase %q, observed generation %d", names, f.status.Phase, f.status.ObservedGeneration)
	}
}
