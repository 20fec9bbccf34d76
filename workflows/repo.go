package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/repo"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// The repository loop. The worker clones, diffs and pushes outside the
// sandbox (repo.Activities, on the session queue, where the credentials
// are); the workspace moves between them through the snapshot store, so
// every backend gets the same checkout. None of this needs GetVersion:
// it runs only for sessions given a repository (new input fields and new
// update handlers), which no recorded history holds.

var repoActs *repo.Activities

// PendingRepo is a repository waiting to be cloned at the next turn
// boundary.
type PendingRepo struct {
	Spec session.RepoSpec `json:"spec"`
	Full bool             `json:"full,omitempty"`
	By   session.User     `json:"by"`
	// FromMessage is set when a message named it; a failed clone then
	// tells the model, whose turn goes on with an empty workspace.
	FromMessage bool `json:"from_message,omitempty"`
}

type repoResult struct {
	resp session.SetRepoResponse
	err  string
}

// repoOptions run a repository activity on the repository queue (workers
// with git). A fleet without one answers within ScheduleToStart with a
// clear error instead of a clone that waits forever.
func repoOptions(ctx workflow.Context, queue string, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              session.RepoQueue(queue),
		ScheduleToStartTimeout: 2 * time.Minute,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 3,
		},
	})
}

// repoError is userError, plus what a repository activity no worker
// picked up means.
func (s *sessionRun) repoError(err error) string {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return fmt.Sprintf("no worker serves the repository queue %s (only workers with a git binary do; the worker-local image and cmd/dev have one)", session.RepoQueue(s.queue))
	}
	return userError(err)
}

func (s *sessionRun) noRepoError() error {
	return errors.New("this session has no repository; start a session from one (@sandbot owner/name: what to do) or set it with /repo URL [branch]")
}

func (s *sessionRun) validateSetRepo(ctx workflow.Context, req session.SetRepoRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not set this session's repository: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	if req.Repo.URL == "" {
		return errors.New("/repo needs a repository: owner/name, owner/name@branch or an https:// git URL")
	}
	switch {
	case s.st.Repo != nil:
		return fmt.Errorf("this session already works on %s; start a new thread for another repository", s.st.Repo.Name)
	case s.st.PendingRepo != nil:
		return fmt.Errorf("%s is being cloned already", session.RepoName(s.st.PendingRepo.Spec.URL))
	case s.turnActive:
		return errors.New("a turn is running; /repo when it finishes")
	case s.workspaceUsed():
		return errors.New("this session's workspace already has files; /repo sets the repository of a session whose workspace is still empty (start a new thread)")
	}
	return nil
}

// onSetRepo hands the clone to the main loop (between turns) and answers
// with what was cloned.
func (s *sessionRun) onSetRepo(ctx workflow.Context, req session.SetRepoRequest) (session.SetRepoResponse, error) {
	s.st.PendingRepo = &PendingRepo{Spec: req.Repo, By: req.User, Full: req.Full}
	s.repoDone = nil
	if err := workflow.Await(ctx, func() bool { return s.repoDone != nil || s.destroyRequested }); err != nil {
		return session.SetRepoResponse{}, err
	}
	if s.repoDone == nil {
		return session.SetRepoResponse{}, errors.New("the session was destroyed")
	}
	if s.repoDone.err != "" {
		return session.SetRepoResponse{}, temporal.NewApplicationError(s.repoDone.err, "RepoFailed")
	}
	return s.repoDone.resp, nil
}

// takeRepo notes the repository a session's first message names (or its
// channel's default), to clone before the turn that answers it.
func (s *sessionRun) takeRepo(req session.MessageRequest) {
	if req.Repo == nil || s.st.Repo != nil || s.st.PendingRepo != nil || s.workspaceUsed() || s.st.Turn > 0 {
		return
	}
	s.st.PendingRepo = &PendingRepo{Spec: *req.Repo, By: req.User, FromMessage: true}
}

// setupRepo clones the pending repository and makes it the workspace.
// A failed clone leaves the session as it was, usable, with the reason in
// the thread (and, for a message's repository, in the transcript, so the
// model does not look for files that are not there).
func (s *sessionRun) setupRepo(ctx workflow.Context, turn int) {
	p := *s.st.PendingRepo
	s.st.PendingRepo = nil
	name := session.RepoName(p.Spec.URL)
	fail := func(why string) {
		why = strings.TrimRight(why, ". ")
		s.repoDone = &repoResult{err: fmt.Sprintf("could not start from %s: %s", name, why)}
		s.notice("Could not start from %s: %s. The session goes on with an empty workspace.", name, why)
		if p.FromMessage {
			s.st.appendTranscript(session.HistoryEntry{Turn: turn, At: workflow.Now(ctx), Msg: session.Message{
				Role:    session.RoleUser,
				Content: fmt.Sprintf("[sandbot could not clone the repository %s: %s. The workspace is empty.]", name, why),
			}})
		}
	}
	if s.st.Repo != nil || s.workspaceUsed() {
		fail("the workspace already has files")
		return
	}
	branch := ""
	if p.Spec.Branch != "" {
		branch = " (" + p.Spec.Branch + ")"
	}
	s.notice("Cloning %s%s on the worker…", name, branch)
	var res repo.CloneResult
	err := workflow.ExecuteActivity(repoOptions(ctx, s.queue, 30*time.Minute), repoActs.Clone,
		repo.CloneRequest{SessionID: s.id, Repo: p.Spec, Full: p.Full, Key: sandbox.RepoBaseKey(s.id)}).Get(ctx, &res)
	if err != nil {
		fail(s.repoError(err))
		return
	}
	if s.st.Handle != nil {
		// The sandbox's workspace is empty (Snapshot is unset); the next
		// command's Ensure creates one from the clone.
		s.destroySandbox(ctx, false)
	}
	r := res.Repo
	s.st.Repo = &r
	s.st.Snapshot, s.st.Fingerprint = r.Base, ""
	history := "with its full history"
	if r.Shallow {
		history = "shallow (latest commit only)"
	}
	s.notice("Cloned %s, branch %s, at %s: %d files, %s, %s. The agent sees a git checkout without credentials; /diff shows its changes and /pr opens a pull request.",
		r.Name, r.Branch, shortCommit(r.Commit), res.Files, sandbox.FormatBytes(res.Bytes), history)
	s.st.appendTranscript(session.HistoryEntry{Turn: turn, At: workflow.Now(ctx), Msg: session.Message{
		Role: session.RoleUser,
		Content: fmt.Sprintf("[The workspace is a git checkout of %s, branch %s, at commit %s (%s). It has no network and no credentials: do not try to push or fetch. Commit locally if useful; when asked with /pr, sandbot commits the workspace's files (not .git) and opens a pull request.]",
			r.Name, r.Branch, r.Commit, history),
	}})
	s.repoDone = &repoResult{resp: session.SetRepoResponse{Repo: r, Files: res.Files, Bytes: res.Bytes}}
}

// workspaceUsed reports whether the workspace may hold files: it has a
// snapshot, unless the last checkpoint says that snapshot is empty (turns
// ran commands that left nothing).
func (s *sessionRun) workspaceUsed() bool {
	if s.st.Snapshot == "" {
		return false
	}
	n := len(s.st.Checkpoints)
	return n == 0 || s.st.Checkpoints[n-1].Key != s.st.Snapshot || s.st.Checkpoints[n-1].Files > 0
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func (s *sessionRun) validateDiff(ctx workflow.Context, _ session.DiffRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if s.st.Repo == nil {
		return s.noRepoError()
	}
	return nil
}

// onDiff compares the workspace's last snapshot (the end of the last
// completed turn) with the clone.
func (s *sessionRun) onDiff(ctx workflow.Context, _ session.DiffRequest) (session.DiffResponse, error) {
	r := *s.st.Repo
	cur, asOf := s.st.Snapshot, s.st.Turn
	if s.turnActive {
		asOf--
	}
	var res session.DiffResponse
	if err := workflow.ExecuteActivity(repoOptions(ctx, s.queue, 10*time.Minute), repoActs.Diff, repo.DiffRequest{Repo: r, Current: cur}).Get(ctx, &res); err != nil {
		return session.DiffResponse{}, temporal.NewApplicationError(s.repoError(err), "DiffFailed")
	}
	res.AsOfTurn = asOf
	res.Repo = r
	return res, nil
}

func (s *sessionRun) validateOpenPR(ctx workflow.Context, req session.OpenPRRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if s.st.Repo == nil {
		return s.noRepoError()
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not open a pull request from this session: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	if s.turnActive {
		return errors.New("a turn is running; /pr when it finishes, so the pull request holds finished work")
	}
	if s.prInFlight {
		return errors.New("a /pr is already pushing; wait for it")
	}
	if len(req.Title) > 256 {
		return fmt.Errorf("the title is %d characters; keep it under 256", len(req.Title))
	}
	return nil
}

// onOpenPR pushes the workspace to the session's branch and opens its pull
// request, or adds a commit to the one it opened before.
func (s *sessionRun) onOpenPR(ctx workflow.Context, req session.OpenPRRequest) (session.OpenPRResponse, error) {
	s.prInFlight = true
	defer func() { s.prInFlight = false }()
	r := *s.st.Repo
	n := s.st.PRs + 1
	branch, parent := session.SessionBranch(s.id, n), r.Commit
	if r.PR != nil {
		branch, parent = r.PR.Branch, r.PR.Head
	}
	title := strings.TrimSpace(req.Title)
	if title == "" {
		title = s.prTitle()
	}
	var res session.OpenPRResponse
	err := workflow.ExecuteActivity(repoOptions(ctx, s.queue, 15*time.Minute), repoActs.OpenPR, repo.PRRequest{
		SessionID: s.id, Repo: r, Current: s.st.Snapshot, Branch: branch, Parent: parent,
		Title: title, Body: s.prBody(req.ThreadURL), CoAuthor: req.User, Platform: s.st.Location.Platform,
	}).Get(ctx, &res)
	if err != nil {
		return session.OpenPRResponse{}, temporal.NewApplicationError(s.repoError(err), "PullRequestFailed")
	}
	if s.st.Repo == nil { // destroyed meanwhile
		return res, nil
	}
	pr := res.PR
	s.st.Repo.PR = &pr
	if r.PR == nil {
		s.st.PRs = n
	}
	verb := "updated"
	if res.Created {
		verb = "opened"
	}
	s.notice("%s %s pull request #%d (%s) from branch %s.", displayName(req.User), verb, pr.Number, pr.URL, pr.Branch)
	s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: workflow.Now(ctx), Msg: session.Message{
		Role:    session.RoleUser,
		Content: fmt.Sprintf("[%s %s pull request #%d (%s) with the workspace as of turn %d, commit %s on branch %s.]", displayName(req.User), verb, pr.Number, pr.URL, s.st.Turn, pr.Head, pr.Branch),
	}})
	return res, nil
}

// prTitle is the first line of the session's first request, cut to fit.
func (s *sessionRun) prTitle() string {
	first := s.firstRequest()
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	first = strings.TrimSpace(first)
	if first == "" {
		first = "Changes from a sandbot session"
	}
	if r := []rune(first); len(r) > 72 {
		first = string(r[:71]) + "…"
	}
	return first
}

func (s *sessionRun) firstRequest() string {
	for _, e := range s.st.Transcript {
		if e.Msg.Role == session.RoleUser && !strings.HasPrefix(e.Msg.Content, "[") {
			return e.Msg.Content
		}
	}
	return ""
}

// prBody says what the session did: the request, the model's last
// answer (its own summary of the work) and a link back to the thread.
func (s *sessionRun) prBody(thread string) string {
	var b strings.Builder
	b.WriteString("### Request\n\n")
	b.WriteString(quote(noPings(cut(s.firstRequest(), 2000))))
	var last string
	for _, e := range s.st.Transcript {
		if e.Msg.Role == session.RoleAssistant && e.Msg.Content != "" {
			last = e.Msg.Content
		}
	}
	if last != "" {
		b.WriteString("\n\n### What the agent did\n\n")
		b.WriteString(noPings(cut(last, 4000)))
	}
	b.WriteString("\n\n---\n")
	if thread != "" {
		fmt.Fprintf(&b, "Opened by sandbot from [this thread](%s), ", thread)
	} else {
		b.WriteString("Opened by sandbot, ")
	}
	fmt.Fprintf(&b, "session `%s`, after turn %d.\n", s.id, s.st.Turn)
	return b.String()
}

// noPings keeps text quoted into a pull request from notifying GitHub
// users or teams: "@name" gets a zero-width space after the @.
func noPings(s string) string { return strings.ReplaceAll(s, "@", "@\u200b") }

func quote(s string) string {
	if s == "" {
		return "> (none)"
	}
	return "> " + strings.ReplaceAll(s, "\n", "\n> ")
}

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
