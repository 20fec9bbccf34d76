package chat

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
)

// Sessions is what the core needs from the session workflows. The Temporal
// implementation is TemporalSessions; tests use hand-written fakes.
//
// Every method is safe for concurrent use. Errors that the user should read
// as they are (a workflow validator's rejection such as "message is 70000
// bytes; the limit is 65536", or "there is no session in this thread") are
// *UserError; anything else is an internal error the core logs and shows as
// a generic line.
type Sessions interface {
	// Send delivers a chat message, starting the session from start if no
	// run of start.Location.ID() is running. Redelivering the same
	// req.EventID returns the first answer with Duplicate set.
	Send(ctx context.Context, start session.SessionInput, req session.MessageRequest) (session.MessageResponse, error)
	// TurnState returns the current (or last) turn of the session.
	TurnState(ctx context.Context, id string) (session.TurnState, error)
	Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error)
	Stop(ctx context.Context, id string, req session.StopRequest) (session.StopResponse, error)
	// Pause returns once the session is quiet at a turn boundary.
	Pause(ctx context.Context, id string, req session.PauseRequest) (session.PauseResponse, error)
	Resume(ctx context.Context, id string, req session.ResumeRequest) (session.PauseResponse, error)
	// Compact returns once the conversation was compacted (or could not be).
	Compact(ctx context.Context, id string, req session.CompactRequest) (session.CompactResponse, error)
	// Rewind returns once the session was rewound (or refused).
	Rewind(ctx context.Context, id string, req session.RewindRequest) (session.RewindResponse, error)
	// SetRepo returns once the session's repository was cloned (or not).
	SetRepo(ctx context.Context, id string, req session.SetRepoRequest) (session.SetRepoResponse, error)
	// Diff returns the workspace's diff against the session's base commit.
	Diff(ctx context.Context, id string, req session.DiffRequest) (session.DiffResponse, error)
	// OpenPR returns once the workspace was pushed and its pull request
	// opened or updated.
	OpenPR(ctx context.Context, id string, req session.OpenPRRequest) (session.OpenPRResponse, error)
	// SetModel picks the model of the session's next turns.
	SetModel(ctx context.Context, id string, req session.SetModelRequest) (session.SetModelResponse, error)
	// SetTitle renames the session.
	SetTitle(ctx context.Context, id string, req session.SetTitleRequest) (session.SetTitleResponse, error)
	// Destroy returns after the sandbox and snapshots are removed.
	Destroy(ctx context.Context, id string, req session.DestroyRequest) (session.DestroyResponse, error)
	SetBackend(ctx context.Context, id string, req session.SetBackendRequest) (session.SetBackendResponse, error)
	// Fork copies session id into the new location req.Location.
	Fork(ctx context.Context, id string, req session.ForkRequest) (session.ForkResponse, error)
	// RecordChatRef records a message the bot posted for the current turn.
	RecordChatRef(ctx context.Context, id string, req session.ChatRefRequest) error
	// ClaimFinal asks the session whether this bot replica may post the
	// finished current turn's answer: one replica is granted it, so two
	// replicas watching one turn post the answer once.
	ClaimFinal(ctx context.Context, id string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error)
	// ClaimWatch asks for, renews or releases the session's watch lease.
	// A claim refused because another replica holds the lease is an
	// answer with Granted false, not an error; a session whose workflow
	// build keeps no lease fails with ErrNoWatchLease.
	ClaimWatch(ctx context.Context, id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error)
	Info(ctx context.Context, id string) (session.Info, error)
	History(ctx context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error)
	// SharedFile returns a file a share_file call put up for the thread,
	// with its bytes (Gone when the session no longer holds them).
	SharedFile(ctx context.Context, id string, req session.SharedFileRequest) (session.SharedFileData, error)
	// List returns sessions matching f, newest first.
	List(ctx context.Context, f ListFilter) ([]SessionSummary, error)
}

// ListFilter selects sessions for List. Empty fields match everything.
type ListFilter struct {
	Platform  string
	Workspace string
	Channel   string
	// Owner is a user ID. Without search attributes it costs one Info
	// query per candidate, so combine it with Platform/Channel.
	Owner string
	// ActiveOnly keeps running sessions only (not destroyed or ended).
	ActiveOnly bool
	// TurnActive narrows to sessions whose turn runs, where the store can
	// tell (search attributes); otherwise it is ignored and callers check
	// the turn state themselves.
	TurnActive bool
	// Limit caps the answer (0: DefaultListLimit).
	Limit int
}

// DefaultListLimit caps List when ListFilter.Limit is zero.
const DefaultListLimit = 200

// SessionSummary is one session as List sees it, without querying it.
type SessionSummary struct {
	WorkflowID string
	Location   session.Location
	Running    bool
	StartedAt  time.Time
	ClosedAt   time.Time
}

// ErrNoSession marks errors about a thread that has no session (never
// started, destroyed, or past retention). It is wrapped in a *UserError.
var ErrNoSession = errors.New("no session")

// ErrNoWatchLease is returned (wrapped) by ClaimWatch for a session whose
// workflow build predates the watch lease; its watcher watches without one.
var ErrNoWatchLease = errors.New("the session keeps no watch lease")

// UserError is an error whose Msg is written for the chat user and may be
// shown as is. Err keeps the cause for logs and errors.Is.
type UserError struct {
	Msg string
	Err error
}

func (e *UserError) Error() string { return e.Msg }
func (e *UserError) Unwrap() error { return e.Err }

// userErrorf returns a *UserError with a formatted message and no cause.
func userErrorf(format string, args ...any) error {
	return &UserError{Msg: fmt.Sprintf(format, args...)}
}

// internalErrorText is what users see for errors that are not theirs to
// read; the detail goes to the log.
const internalErrorText = "Something went wrong on our side; the details are in the bot's log. Try again in a moment."

// UserMessage returns the text to show a user for err: the message of a
// *UserError, or a generic line for anything else (the cause may name hosts
// or internals that do not belong in a chat).
func UserMessage(err error) string {
	var ue *UserError
	if errors.As(err, &ue) {
		return ue.Msg
	}
	return internalErrorText
}

// UIURL links a workflow in the Temporal Web UI, for example
// UIURL("http://localhost:8233", "default", "session/console//local/default")
// = "http://localhost:8233/namespaces/default/workflows/session%2Fconsole%2F%2Flocal%2Fdefault".
// It returns "" when base is empty (no UI configured).
func UIURL(base, namespace, workflowID string) string {
	if base == "" {
		return ""
	}
	if namespace == "" {
		namespace = "default"
	}
	return strings.TrimRight(base, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(workflowID)
}
