package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Checkpoint is the end of a completed turn: the workspace snapshot it
// left (a manifest, so keeping it costs what the turn changed) and when.
type Checkpoint struct {
	Turn int       `json:"turn"`
	At   time.Time `json:"at"`
	// Key is the workspace's snapshot then ("" for a workspace never used).
	Key         string `json:"key,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Files       int    `json:"files,omitempty"`
	Bytes       int64  `json:"bytes,omitempty"`
}

// checkpoint returns the kept checkpoint of turn n.
func (st *State) checkpoint(n int) (Checkpoint, bool) {
	for _, c := range st.Checkpoints {
		if c.Turn == n {
			return c, true
		}
	}
	return Checkpoint{}, false
}

func (st *State) checkpointInfo() []session.Checkpoint {
	var out []session.Checkpoint
	for _, c := range st.Checkpoints {
		out = append(out, session.Checkpoint{Turn: c.Turn, At: c.At, Files: c.Files, Bytes: c.Bytes})
	}
	return out
}

// keptTurns lists the kept checkpoints' turns for messages.
func (st *State) keptTurns() string {
	if len(st.Checkpoints) == 0 {
		return "none yet"
	}
	var b strings.Builder
	for i, c := range st.Checkpoints {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(c.Turn))
	}
	return b.String()
}

// recordCheckpoint keeps the end of the turn just completed, then drops
// what the retention no longer keeps: beyond Settings.Checkpoints, and
// older than Settings.CheckpointMaxAge (the latest always stays). A
// dropped checkpoint's snapshot is deleted once nothing else names it.
func (s *sessionRun) recordCheckpoint(ctx workflow.Context, files int, bytes int64) {
	now := workflow.Now(ctx)
	c := Checkpoint{Turn: s.st.Turn, At: now, Key: s.st.Snapshot, Fingerprint: s.st.Fingerprint, Files: files, Bytes: bytes}
	if n := len(s.st.Checkpoints); n > 0 && c.Key == s.st.Checkpoints[n-1].Key && files == 0 {
		// The workspace did not change: it is the previous turn's.
		c.Files, c.Bytes = s.st.Checkpoints[n-1].Files, s.st.Checkpoints[n-1].Bytes
	}
	s.st.Checkpoints = append(s.st.Checkpoints, c)
	keep := s.st.Settings.Checkpoints
	if keep <= 0 {
		keep = session.DefaultCheckpoints
	}
	maxAge := s.st.Settings.CheckpointMaxAge
	if maxAge <= 0 {
		maxAge = session.DefaultCheckpointMaxAge
	}
	var kept, dropped []Checkpoint
	for i, c := range s.st.Checkpoints {
		last := i == len(s.st.Checkpoints)-1
		if !last && (len(s.st.Checkpoints)-i > keep || now.Sub(c.At) > maxAge) {
			dropped = append(dropped, c)
			continue
		}
		kept = append(kept, c)
	}
	s.st.Checkpoints = kept
	s.dropSnapshots(dropped)
}

// dropSnapshots queues the snapshots of dropped checkpoints for deletion,
// unless a kept checkpoint or the session's current snapshot names them.
func (s *sessionRun) dropSnapshots(dropped []Checkpoint) {
	for _, c := range dropped {
		if c.Key == "" || c.Key == s.st.Snapshot {
			continue
		}
		if s.keyInUse(c.Key) {
			continue
		}
		if !slices.Contains(s.st.Stale, c.Key) {
			s.st.Stale = append(s.st.Stale, c.Key)
		}
	}
}

// keyInUse reports whether a kept checkpoint names the snapshot key.
func (s *sessionRun) keyInUse(key string) bool {
	if s.st.Repo != nil && s.st.Repo.Base == key {
		return true // the clone: the base of every /diff
	}
	return slices.ContainsFunc(s.st.Checkpoints, func(c Checkpoint) bool { return c.Key == key })
}

func (s *sessionRun) validateRewind(ctx workflow.Context, req session.RewindRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if !s.checkpoints {
		return errors.New("this session's current run predates checkpoints; it can rewind after its next continue-as-new")
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not rewind this session: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	if s.turnActive || s.rewind != nil {
		return errors.New("a turn is running; wait for it to finish (or /stop it), then /rewind")
	}
	if req.Turn >= s.st.Turn {
		return fmt.Errorf("turn %d is the latest; /rewind goes back to an earlier turn (kept: %s)", req.Turn, s.st.keptTurns())
	}
	if _, ok := s.st.checkpoint(req.Turn); !ok {
		return fmt.Errorf("turn %d has no checkpoint; the session keeps the ends of turns %s", req.Turn, s.st.keptTurns())
	}
	return nil
}

// onRewind hands the rewind to the main loop (between turns) and answers
// with what it did.
func (s *sessionRun) onRewind(ctx workflow.Context, req session.RewindRequest) (session.RewindResponse, error) {
	s.rewind = &req
	if err := workflow.Await(ctx, func() bool { return s.rewind == nil || s.destroyRequested }); err != nil {
		return session.RewindResponse{}, err
	}
	if s.rewound.err != "" {
		return session.RewindResponse{}, temporal.NewApplicationError(s.rewound.err, "RewindFailed")
	}
	return s.rewound.resp, nil
}

type rewindResult struct {
	resp session.RewindResponse
	err  string
}

// doRewind brings the workspace back to the checkpoint of req.Turn and
// the conversation to the end of that turn. The live sandbox is restored
// in place (only what differs is written); a session without one just
// points at the checkpoint's snapshot, which the next command restores.
// The transcript keeps a note of the rewind, so the model knows what was
// undone.
func (s *sessionRun) doRewind(ctx workflow.Context, req session.RewindRequest) rewindResult {
	c, ok := s.st.checkpoint(req.Turn)
	if !ok {
		return rewindResult{err: fmt.Sprintf("turn %d has no checkpoint any more", req.Turn)}
	}
	if c.Key != s.st.Snapshot && s.st.Handle != nil && s.st.Suspended {
		// A suspended sandbox (a stopped container) is resumed first, so
		// the restore has something to write into.
		if _, err := s.ensureSandbox(ctx); err != nil {
			return rewindResult{err: "could not resume the sandbox: " + userError(err)}
		}
	}
	if c.Key != s.st.Snapshot && s.st.Handle != nil {
		if c.Key == "" {
			// The workspace was empty then: start a fresh sandbox.
			dreq := sandbox.DestroyRequest{SessionID: s.id, Handle: s.st.Handle}
			if err := workflow.ExecuteActivity(housekeepingOptions(ctx, s.st.Handle.TaskQueue), sandboxActs.Destroy, dreq).Get(ctx, nil); err != nil {
				return rewindResult{err: "could not empty the workspace: " + userError(err)}
			}
			s.st.Handle = nil
		} else {
			rreq := sandbox.RestoreRequest{Handle: *s.st.Handle, Key: c.Key, Current: s.st.Snapshot}
			err := workflow.ExecuteActivity(housekeepingOptions(ctx, s.st.Handle.TaskQueue), sandboxActs.RestoreWorkspace, rreq).Get(ctx, nil)
			var te *temporal.TimeoutError
			switch {
			case err != nil && errors.As(err, &te):
				// The host holding the sandbox is gone; the next command
				// restores the checkpoint on another.
				s.st.Handle = nil
			case err != nil:
				return rewindResult{err: "could not restore the workspace of turn " + fmt.Sprint(req.Turn) + ": " + userError(err)}
			}
		}
	}
	undone := s.st.Turn - req.Turn
	s.st.Snapshot, s.st.Fingerprint = c.Key, ""
	// The undone turns' checkpoints go; their snapshots with them.
	var dropped []Checkpoint
	kept := s.st.Checkpoints[:0:0]
	for _, k := range s.st.Checkpoints {
		if k.Turn > req.Turn {
			dropped = append(dropped, k)
		} else {
			kept = append(kept, k)
		}
	}
	s.st.Checkpoints = kept
	s.dropSnapshots(dropped)
	// The conversation up to the end of that turn; a summary that
	// replaced older turns stays, whichever turn wrote it.
	var transcript []session.HistoryEntry
	for i, e := range s.st.Transcript {
		if e.Turn <= req.Turn || i == 0 && strings.HasPrefix(e.Msg.Content, agent.CompactNotePrefix) {
			transcript = append(transcript, e)
		}
	}
	s.st.Transcript = transcript
	s.st.ModelRef = nil // positions moved: the next call sends it whole
	by := displayName(req.User)
	s.st.appendTranscript(session.HistoryEntry{Turn: req.Turn, At: workflow.Now(ctx), Msg: session.Message{
		Role: session.RoleUser,
		Content: fmt.Sprintf("[%s rewound the workspace and this conversation to the end of turn %d. Turns %d to %d were undone: their messages are gone and the files are as they were after turn %d.]",
			by, req.Turn, req.Turn+1, s.st.Turn, req.Turn),
	}})
	s.notice("%s rewound the session to the end of turn %d; %d later %s undone.", by, req.Turn, undone, pluralWord(undone, "turn was", "turns were"))
	return rewindResult{resp: session.RewindResponse{Turn: req.Turn, Undone: undone}}
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
