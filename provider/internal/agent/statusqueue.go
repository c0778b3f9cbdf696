package agent

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	agentv1 "provisioner.dev/provider/api/agent/v1alpha1"
)

// statusWriteTimeout bounds one status write (a Get and an Update, retried on conflict).
const statusWriteTimeout = 30 * time.Second

// statusQueue records a plan's progress in the background: each change is queued and
// written in order, and the changes that queue up while a write is in flight go out
// together in the next one. An instruction then starts as soon as the one before it ends
// instead of after two round trips to the API server (a plan of four instructions made
// about fourteen writes, one after the other, on the path to its node). Nothing reads the
// progress to decide anything: the outcome that the HostMachine controller waits for is
// written by the runner after flush, in the same order as before.
type statusQueue struct {
	report Reporter
	log    logr.Logger
	// ctx carries the values of the execution's context, not its cancellation: a change
	// queued as the execution is cancelled must still land.
	ctx context.Context

	mu      sync.Mutex
	pending []func(*agentv1.NodePlanStatus)
	writing bool
	idle    *sync.Cond
}

func newStatusQueue(ctx context.Context, report Reporter, log logr.Logger) *statusQueue {
	q := &statusQueue{report: report, log: log, ctx: context.WithoutCancel(ctx)}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// add queues mutate; a writer starts if none runs.
func (q *statusQueue) add(mutate func(*agentv1.NodePlanStatus)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, mutate)
	if !q.writing {
		q.writing = true
		go q.drain()
	}
}

// drain writes what is queued, in batches, until nothing is; a failed write is logged
// and dropped, as a failed progress write always was.
func (q *statusQueue) drain() {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.writing = false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(q.ctx, statusWriteTimeout)
		err := q.report(ctx, func(s *agentv1.NodePlanStatus) {
			for _, mutate := range batch {
				mutate(s)
			}
		})
		cancel()
		if err != nil {
			q.log.Error(err, "status update failed", "changes", len(batch))
		}
	}
}

// flush waits until everything queued so far is written (or its write failed).
func (q *statusQueue) flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.writing {
		q.idle.Wait()
	}
}
