package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockInfo is the content of the plan lock file.
type LockInfo struct {
	// Plan holding the lock, "namespace/name".
	Plan string `json:"plan"`
	// Generation of the plan being executed.
	Generation int64 `json:"generation"`
	// PID of the agent holding the lock.
	PID int `json:"pid"`
	// AcquiredAt is when the holder took the lock.
	AcquiredAt time.Time `json:"acquiredAt"`
	// Heartbeat is refreshed while the holder runs; a lock whose heartbeat is older than
	// the stale threshold is taken over even if its PID exists (it may be reused).
	Heartbeat time.Time `json:"heartbeat"`
	// ChildPGID is the process group of the instruction running now, 0 between
	// instructions. Whoever takes a stale lock over kills that group first, so an
	// instruction never runs twice at once.
	ChildPGID int `json:"childPGID,omitempty"`
	// Instruction is the name of the instruction running now, empty between instructions.
	Instruction string `json:"instruction,omitempty"`

	// KilledProcesses, on a holder this agent replaced: how many processes of its
	// instruction were still running and were killed. Not stored.
	KilledProcesses int `json:"-"`
}

// Lock is the node's plan lock: a file whose content names the holder. flock(2) guards
// only the read-check-write of the content, never the execution, so a holder that dies
// leaves its content behind for the next agent to judge.
type Lock struct {
	// Path of the lock file.
	Path string
	// StaleAfter: a holder whose heartbeat is older than this is presumed dead.
	StaleAfter time.Duration
	// PID of this agent. Default: os.Getpid().
	PID int
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

func (l *Lock) pid() int {
	if l.PID != 0 {
		return l.PID
	}
	return os.Getpid()
}

func (l *Lock) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// with runs fn on the lock file's current content under flock, and writes back what fn
// returns when it says so.
func (l *Lock) with(fn func(current *LockInfo) (next *LockInfo, write bool, err error)) error {
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(l.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", l.Path, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck
	raw, err := os.ReadFile(l.Path)
	if err != nil {
		return err
	}
	var current *LockInfo
	if len(raw) > 0 {
		current = &LockInfo{}
		if err := json.Unmarshal(raw, current); err != nil {
			// Unreadable content names no live holder: treat the lock as free.
			current = nil
		}
	}
	next, write, err := fn(current)
	if err != nil || !write {
		return err
	}
	var data []byte
	if next != nil {
		if data, err = json.Marshal(next); err != nil {
			return err
		}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Sync()
}

// Read returns the current holder, nil when the lock is free.
func (l *Lock) Read() (*LockInfo, error) {
	var info *LockInfo
	err := l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		info = current
		return nil, false, nil
	})
	return info, err
}

// Stale says whether a holder is dead: another PID that no longer runs, or a heartbeat
// older than StaleAfter.
func (l *Lock) Stale(info *LockInfo) bool {
	if info.PID == l.pid() {
		return false
	}
	return !processAlive(info.PID) || l.now().Sub(info.Heartbeat) > l.StaleAfter
}

// Acquire takes the lock for plan, unless a live holder has it. It is re-entrant for
// the same plan and PID. When it takes a stale lock over, it kills the dead holder's
// instruction process group and returns the holder it replaced.
func (l *Lock) Acquire(plan string, generation int64) (acquired bool, holder *LockInfo, replaced *LockInfo, err error) {
	err = l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		if current != nil && !(current.PID == l.pid() && current.Plan == plan) {
			if !l.Stale(current) {
				holder = current
				return nil, false, nil
			}
			killed, err := killGroup(current.ChildPGID)
			if err != nil {
				return nil, false, fmt.Errorf("the stale holder's (pid %d, plan %s) instruction %s: %w", current.PID, current.Plan, current.Instruction, err)
			}
			replaced = current
			replaced.KilledProcesses = killed
		}
		now := l.now()
		next := &LockInfo{Plan: plan, Generation: generation, PID: l.pid(), AcquiredAt: now, Heartbeat: now}
		if current != nil && current.PID == l.pid() && current.Plan == plan {
			next.AcquiredAt = current.AcquiredAt
		}
		acquired, holder = true, next
		return next, true, nil
	})
	return acquired, holder, replaced, err
}

// Update changes this agent's lock for plan (heartbeat, child process group). It fails
// when the lock is no longer this agent's.
func (l *Lock) Update(plan string, fn func(*LockInfo)) error {
	return l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		if current == nil || current.PID != l.pid() || current.Plan != plan {
			return nil, false, errors.New("the plan lock is no longer held by this agent for " + plan)
		}
		fn(current)
		current.Heartbeat = l.now()
		return current, true, nil
	})
}

// Release frees the lock if this agent holds it for plan.
func (l *Lock) Release(plan string) error {
	return l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		if current == nil || current.PID != l.pid() || current.Plan != plan {
			return nil, false, nil
		}
		return nil, true, nil
	})
}

// ReleaseStale frees the lock when its holder is stale, killing the holder's
// instruction group; it returns the holder it removed.
func (l *Lock) ReleaseStale() (*LockInfo, error) {
	var removed *LockInfo
	err := l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		if current == nil || !l.Stale(current) {
			return nil, false, nil
		}
		killed, err := killGroup(current.ChildPGID)
		if err != nil {
			return nil, false, fmt.Errorf("the stale holder's (pid %d, plan %s) instruction %s: %w", current.PID, current.Plan, current.Instruction, err)
		}
		removed = current
		removed.KilledProcesses = killed
		return nil, true, nil
	})
	return removed, err
}

// TakeOver makes a stale holder's lock this agent's, for the same plan, so this agent
// resumes it before anything else runs. It first kills what is left of the holder's
// instruction and sets stale.KilledProcesses; it fails, leaving the lock as it was, when
// that does not end.
func (l *Lock) TakeOver(stale *LockInfo) error {
	return l.with(func(current *LockInfo) (*LockInfo, bool, error) {
		if current == nil || current.Plan != stale.Plan || current.PID != stale.PID || !l.Stale(current) {
			return nil, false, fmt.Errorf("the plan lock changed hands while taking it over from pid %d", stale.PID)
		}
		killed, err := killGroup(current.ChildPGID)
		if err != nil {
			return nil, false, fmt.Errorf("the stale holder's (pid %d) instruction %s: %w", current.PID, current.Instruction, err)
		}
		stale.KilledProcesses = killed
		now := l.now()
		return &LockInfo{Plan: current.Plan, Generation: current.Generation, PID: l.pid(), AcquiredAt: now, Heartbeat: now}, true, nil
	})
}

// processAlive: the PID exists and is not a zombie (a dead process its parent, or
// init, has not reaped yet still answers kill(pid, 0)).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, _, ok := procStat(pid)
	return !ok || state != 'Z'
}

// procStat reads a process's state and process group from /proc/<pid>/stat.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	rest := raw[bytes.LastIndexByte(raw, ')')+1:]
	fields := strings.Fields(string(rest))
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(fields[2])
	return fields[0][0], pgrp, err == nil
}

// groupMembers counts the live (non-zombie) processes in the process group.
func groupMembers(pgid int) int {
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1 // the group answered kill(-pgid, 0): at least one
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(pid); ok && pgrp == pgid && state != 'Z' {
			n++
		}
	}
	return n
}

// killGroupTimeout bounds the wait for a killed process group to be gone.
var killGroupTimeout = 10 * time.Second

// killGroup SIGKILLs a dead holder's instruction group and waits until none of it runs,
// so the plan's next run never overlaps the killed one. It returns how many processes
// the group had, and an error when some still run after killGroupTimeout (a process in
// uninterruptible sleep): the caller must not start anything then.
func killGroup(pgid int) (int, error) {
	if pgid <= 1 {
		return 0, nil
	}
	found := groupMembers(pgid)
	if found == 0 {
		return 0, nil
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(killGroupTimeout)
	for {
		left := groupMembers(pgid)
		if left == 0 {
			return found, nil
		}
		if time.Now().After(deadline) {
			return found, fmt.Errorf("%d of the %d processes of its group %d still run %s after SIGKILL; nothing starts until they are gone", left, found, pgid, killGroupTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
