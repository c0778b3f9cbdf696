package agent

// Supervision of one long-running command (the kubelet) on hosts without an init system
// of ours to lean on (no systemd): `supervise start` detaches a supervisor that runs the
// command again whenever it exits, `supervise stop` ends the supervisor and the command's
// process group. A plan instruction starts it and the reset plan stops it, so both are
// idempotent: starting what already runs with the same command does nothing, stopping what
// does not run succeeds.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultSuperviseDir holds each supervised command's pid file, command and log.
const DefaultSuperviseDir = "/run/provisioner/supervise"

// superviseLogLimit: a log larger than this when the command (re)starts is rotated to `.1`.
const superviseLogLimit = 64 << 20

var superviseNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Supervised names one supervised command and where its files are.
type Supervised struct {
	// Name is a DNS label, e.g. kubelet.
	Name string
	// Dir holds <name>.pid (the supervisor's pid, also its process group), <name>.json
	// (the command) and <name>.log (the supervisor's and the command's output).
	Dir string
}

func (s Supervised) file(ext string) string { return filepath.Join(s.Dir, s.Name+"."+ext) }

// PidFile is the supervisor's pid file.
func (s Supervised) PidFile() string { return s.file("pid") }

// LogFile is where the supervisor and the command write.
func (s Supervised) LogFile() string { return s.file("log") }

func (s Supervised) validate() error {
	if !superviseNameRE.MatchString(s.Name) || len(s.Name) > 63 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--name %q is not a DNS label", s.Name)}
	}
	if s.Dir == "" {
		return &ExitError{Code: ExitUsage, Err: errors.New("no supervise directory")}
	}
	return nil
}

// SuperviseOptions are start's inputs.
type SuperviseOptions struct {
	Supervised
	// Command and its arguments; Command[0] an absolute path or found in PATH.
	Command []string
	// RestartDelay is the first pause before a restart; it doubles up to 30 s while the
	// command keeps exiting within a minute of its start.
	RestartDelay time.Duration
	// StopTimeout is how long stop waits after SIGTERM before SIGKILL.
	StopTimeout time.Duration
	// Self runs `supervise run` (default: this executable).
	Self string
	// Out gets what start and stop say.
	Out io.Writer
}

// superviseState is <name>.json: what runs, for start's same-command check.
type superviseState struct {
	Command      []string `json:"command"`
	RestartDelay string   `json:"restartDelay"`
	StopTimeout  string   `json:"stopTimeout"`
}

// running returns the supervisor's pid when its pid file names a live supervisor of this
// name (a reused pid running something else does not count).
func (s Supervised) running() (int, bool) {
	raw, err := os.ReadFile(s.PidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if !slices.Contains(args, "supervise") || !slices.Contains(args, s.Name) {
		return 0, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// A zombie (state Z after the command name in parentheses) is not running.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return 0, false
		}
	}
	return pid, true
}

// Running reports whether the supervisor runs, and its pid.
func (s Supervised) Running() (int, bool) { return s.running() }

// SuperviseStart starts a detached supervisor of o.Command unless one of this name runs
// the same command already; one running another command is stopped first.
func SuperviseStart(o SuperviseOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if len(o.Command) == 0 {
		return &ExitError{Code: ExitUsage, Err: errors.New("no command: supervise start --name N -- COMMAND [ARG...]")}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.RestartDelay <= 0 {
		o.RestartDelay = 2 * time.Second
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 15 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return err
	}
	state := superviseState{Command: o.Command, RestartDelay: o.RestartDelay.String(), StopTimeout: o.StopTimeout.String()}
	if pid, ok := o.running(); ok {
		var current superviseState
		if raw, err := os.ReadFile(o.file("json")); err == nil && json.Unmarshal(raw, &current) == nil && slices.Equal(current.Command, o.Command) {
			fmt.Fprintf(o.Out, "%s: already supervised (pid %d)\n", o.Name, pid)
			return nil
		}
		fmt.Fprintf(o.Out, "%s: supervised with another command; restarting it\n", o.Name)
		if err := SuperviseStop(o); err != nil {
			return err
		}
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.file("json"), raw, 0o600); err != nil {
		return err
	}
	_ = os.Remove(o.PidFile())
	self := o.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	log, err := os.OpenFile(o.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	// Its own session: the agent's instruction ends, the plan's process group is killed on a
	// timeout, the supervisor stays. No inherited pipe either: the instruction's output
	// reader would wait for the supervisor otherwise.
	cmd := exec.Command(self, "supervise", "run", "--name", o.Name, "--dir", o.Dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(10 * time.Second)
	for {
		if pid, ok := o.running(); ok {
			fmt.Fprintf(o.Out, "%s: supervised (pid %d, log %s)\n", o.Name, pid, o.LogFile())
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the supervisor of %s exited at start (%v); see %s", o.Name, err, o.LogFile())
		case <-deadline:
			return fmt.Errorf("the supervisor of %s wrote no pid file within 10s; see %s", o.Name, o.LogFile())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SuperviseStop ends the supervisor (SIGTERM, which stops the command) and then kills
// whatever is left of its process group, the command's children included.
func SuperviseStop(o SuperviseOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	timeout := o.StopTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
		var current superviseState
		if raw, err := os.ReadFile(o.file("json")); err == nil && json.Unmarshal(raw, &current) == nil {
			if d, err := time.ParseDuration(current.StopTimeout); err == nil {
				timeout = d
			}
		}
	}
	pid, ok := o.running()
	if !ok {
		_ = os.Remove(o.PidFile())
		fmt.Fprintf(o.Out, "%s: not running\n", o.Name)
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	// The supervisor waits for the command for timeout; a little more for itself.
	deadline := time.Now().Add(timeout + 5*time.Second)
	for time.Now().Before(deadline) {
		if _, alive := o.running(); !alive {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The supervisor's pid is its session's and process group's id: everything it started.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && groupMembers(pid) > 0; {
		time.Sleep(100 * time.Millisecond)
	}
	_ = os.Remove(o.PidFile())
	fmt.Fprintf(o.Out, "%s: stopped\n", o.Name)
	return nil
}

// SuperviseRun is the detached supervisor itself: it writes its pid file, runs the command
// again after every exit (backing off while it keeps failing fast) and on SIGTERM or SIGINT
// stops the command (SIGTERM, SIGKILL after the stop timeout) and removes the pid file.
func SuperviseRun(ctx context.Context, s Supervised) error {
	if err := s.validate(); err != nil {
		return err
	}
	var state superviseState
	raw, err := os.ReadFile(s.file("json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &state); err != nil || len(state.Command) == 0 {
		return fmt.Errorf("%s: no command (%v)", s.file("json"), err)
	}
	delay, err := time.ParseDuration(state.RestartDelay)
	if err != nil {
		delay = 2 * time.Second
	}
	stopTimeout, err := time.ParseDuration(state.StopTimeout)
	if err != nil {
		stopTimeout = 15 * time.Second
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(s.PidFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(s.PidFile())
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s supervise %s: %s\n", time.Now().UTC().Format(time.RFC3339), s.Name, fmt.Sprintf(format, args...))
	}
	backoff := delay
	for {
		rotateLog(s.LogFile())
		started := time.Now()
		cmd := exec.Command(state.Command[0], state.Command[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			say("cannot start %s: %v", state.Command[0], err)
		} else {
			say("started %s (pid %d)", strings.Join(state.Command, " "), cmd.Process.Pid)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				say("%s exited: %v", state.Command[0], exitText(err))
			case <-ctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(stopTimeout):
					_ = cmd.Process.Kill()
					<-done
				}
				say("stopped")
				return nil
			}
		}
		if time.Since(started) > time.Minute {
			backoff = delay
		}
		say("restarting in %s", backoff)
		select {
		case <-ctx.Done():
			say("stopped")
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// rotateLog moves a log past superviseLogLimit to `.1`. The supervisor's stderr keeps
// writing to the moved file until the next restart; the command's next run gets the new.
func rotateLog(path string) {
	if info, err := os.Stat(path); err == nil && info.Size() > superviseLogLimit {
		if os.Rename(path, path+".1") == nil {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
				_ = syscall.Dup2(int(f.Fd()), 2)
				_ = f.Close()
			}
		}
	}
}
