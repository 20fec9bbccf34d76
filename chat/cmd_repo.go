package chat

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/sandbot/sandbot/session"
)

// RepoConfig is how the bot reads repositories out of messages. The worker
// enforces the same allowlist (it holds the credentials); the bot checks
// it first so a refused repository starts no session.
type RepoConfig struct {
	// Allow are session.RepoAllowed patterns (empty: no repositories).
	Allow []string
	// GitURL is what owner/name resolves against (https://github.com).
	GitURL string
	// ChannelDefault returns a channel's default repository.
	ChannelDefault func(channel string) (session.RepoSpec, bool)
}

// repoLead finds a repository at the start of a message: "owner/name: …",
// "owner/name@branch: …", "in owner/name[@branch] …", or a git URL first
// ("https://host/o/r.git …"). A bare path without a colon ("src/x.go is
// broken") is not one.
var repoLead = regexp.MustCompile(`^(?i:in\s+)?(<?(?:https?://|ssh://|git@)[^\s>]+>?|[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(?:@[A-Za-z0-9_./-]+)?)(:|,)?(?:\s|$)`)

// messageRepo returns the repository a message names (named), or its
// channel's default, or nil; an error when it names one the bot refuses.
func (c *Core) messageRepo(th Thread, text string) (*session.RepoSpec, bool, error) {
	if m := repoLead.FindStringSubmatch(text); m != nil {
		url := strings.HasPrefix(strings.TrimPrefix(m[1], "<"), "http") || strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "git@")
		in := strings.HasPrefix(strings.ToLower(text), "in ")
		if url || in || m[2] != "" {
			spec, err := session.ParseRepoSpec(strings.TrimSuffix(m[1], ":"), c.gitURL())
			if err != nil {
				return nil, false, err
			}
			if err := c.checkRepo(spec); err != nil {
				return nil, false, err
			}
			return &spec, true, nil
		}
	}
	if c.cfg.Repos.ChannelDefault != nil {
		if spec, ok := c.cfg.Repos.ChannelDefault(th.Channel); ok {
			return &spec, false, nil
		}
	}
	return nil, false, nil
}

func (c *Core) gitURL() string {
	if c.cfg.Repos.GitURL != "" {
		return c.cfg.Repos.GitURL
	}
	return "https://github.com"
}

func (c *Core) checkRepo(spec session.RepoSpec) error {
	if session.RepoAllowed(c.cfg.Repos.Allow, spec.URL) {
		return nil
	}
	return &UserError{Msg: session.NotAllowedText(spec.URL, c.cfg.Repos.Allow)}
}

var repoCommand = command{
	name:  CmdRepo,
	usage: "/repo [owner/name|URL] [branch] [full]", help: "start this session from a git repository (full: all history); without arguments, show it",
	parse: func(cmd *Command) error {
		if len(cmd.Args) > 3 || len(cmd.Args) == 3 && strings.ToLower(cmd.Args[2]) != "full" {
			return errUsage
		}
		return nil
	},
	run: (*Core).runRepo,
}

func (c *Core) runRepo(ctx context.Context, r request) (Reply, error) {
	if len(r.cmd.Args) == 0 {
		cctx, cancel := c.quick(ctx)
		defer cancel()
		info, err := c.s.Info(cctx, r.id)
		if err != nil {
			return c.failed("repo", r, err)
		}
		if info.Repo == nil {
			return Reply{Text: "This session has no repository. `/repo owner/name [branch]` starts it from one while its workspace is empty.", Ephemeral: true}, nil
		}
		return Reply{Text: repoText(info.Repo), Ephemeral: true}, nil
	}
	spec, err := session.ParseRepoSpec(r.cmd.Args[0], c.gitURL())
	if err != nil {
		return Reply{Text: err.Error(), Ephemeral: true}, nil
	}
	full := false
	for _, a := range r.cmd.Args[1:] {
		switch {
		case strings.EqualFold(a, "full"):
			full = true
		case spec.Branch == "":
			spec.Branch = a
			if _, err := session.ParseRepoSpec("o/r@"+a, c.gitURL()); err != nil {
				return Reply{Text: err.Error(), Ephemeral: true}, nil
			}
		default:
			return Reply{Text: "Give the branch once: `/repo owner/name branch` or `/repo owner/name@branch`.", Ephemeral: true}, nil
		}
	}
	if err := c.checkRepo(spec); err != nil {
		return Reply{Text: UserMessage(err), Ephemeral: true}, nil
	}
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.SetRepo(ctx, r.id, session.SetRepoRequest{Repo: spec, Full: full, User: r.u})
	if err != nil {
		return c.failed("repo", r, err)
	}
	return Reply{Text: fmt.Sprintf("This session now works on %s: %s files, %s. /diff shows the agent's changes, /pr opens a pull request.",
		repoText(&res.Repo), thousands(res.Files), session.FormatBytes(res.Bytes))}, nil
}

// repoText is "acme/widgets (main @ 1a2b3c4d5e6f), PR #12 <url>".
func repoText(r *session.Repo) string {
	s := fmt.Sprintf("**%s** (%s @ `%s`)", r.Name, r.Branch, shortSHA(r.Commit))
	if r.PR != nil {
		s += fmt.Sprintf(", pull request [#%d](%s) from `%s`", r.PR.Number, r.PR.URL, r.PR.Branch)
	}
	return s
}

func shortSHA(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

var diffCommand = command{
	name:  CmdDiff,
	usage: "/diff", help: "the workspace's changes since the base commit: a summary, and the patch as a file",
	run: (*Core).runDiff,
}

// maxDiffFilesShown bounds the per-file lines of /diff's summary.
const maxDiffFilesShown = 25

func (c *Core) runDiff(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.slow(ctx)
	defer cancel()
	d, err := c.s.Diff(ctx, r.id, session.DiffRequest{User: r.u})
	if err != nil {
		return c.failed("diff", r, err)
	}
	if len(d.Files) == 0 {
		return Reply{Text: fmt.Sprintf("No changes: as of turn %d the workspace matches %s.", d.AsOfTurn, repoText(&d.Repo))}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**%d %s changed**, +%s −%s against %s, as of turn %d:\n", len(d.Files), plural(len(d.Files), "file", "files"),
		thousands(d.Added), thousands(d.Deleted), repoText(&d.Repo), d.AsOfTurn)
	for i, f := range d.Files {
		if i == maxDiffFilesShown {
			fmt.Fprintf(&b, "- … and %d more (in the patch)\n", len(d.Files)-i)
			break
		}
		change := fmt.Sprintf("+%d −%d", f.Added, f.Deleted)
		if f.Binary {
			change = "binary"
		}
		fmt.Fprintf(&b, "- `%s` %s (%s)\n", strings.ReplaceAll(f.Path, "`", "'"), f.Status, change)
	}
	if d.Truncated {
		fmt.Fprintf(&b, "The patch is cut at %s; the summary above covers every file.\n", session.FormatBytes(session.MaxPatchBytes))
	}
	a := Attachment{Name: "session.diff", Title: fmt.Sprintf("%s: diff as of turn %d", d.Repo.Name, d.AsOfTurn), Content: d.Patch}
	if at, ok := r.p.(Attacher); ok {
		if err := at.Attach(ctx, r.th, a); err != nil {
			c.log.Warn("attach the diff failed", "workflow_id", r.id, "err", err)
			b.WriteString("(The patch could not be attached: " + err.Error() + ")")
		}
	} else {
		b.WriteString("\n```diff\n" + strings.ReplaceAll(d.Patch, "```", "`\u200b``") + "\n```")
	}
	return Reply{Text: b.String()}, nil
}

var prCommand = command{
	name:  CmdPR,
	usage: "/pr [title]", help: "push the workspace to the session's branch and open or update its pull request",
	parse: func(*Command) error { return nil }, // every word is the title
	run:   (*Core).runPR,
}

func (c *Core) runPR(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.slow(ctx)
	defer cancel()
	link := ""
	if l, ok := r.p.(ThreadURLer); ok {
		link = l.ThreadURL(r.th)
	}
	res, err := c.s.OpenPR(ctx, r.id, session.OpenPRRequest{Title: strings.Join(r.cmd.Args, " "), ThreadURL: link, User: r.u})
	if err != nil {
		return c.failed("pr", r, err)
	}
	switch {
	case res.Created:
		return Reply{Text: fmt.Sprintf("Opened pull request [#%d](%s) from `%s` (%d %s changed).", res.PR.Number, res.PR.URL, res.PR.Branch, res.Files, plural(res.Files, "file", "files"))}, nil
	case res.Changed:
		return Reply{Text: fmt.Sprintf("Pushed a new commit to `%s`; pull request [#%d](%s) is updated.", res.PR.Branch, res.PR.Number, res.PR.URL)}, nil
	}
	return Reply{Text: fmt.Sprintf("Nothing new to push since the last /pr; pull request [#%d](%s) is as it was (its description was refreshed).", res.PR.Number, res.PR.URL)}, nil
}

// ThreadURLer is an optional Poster capability: a web link to a thread, for
// pull requests to link back to.
type ThreadURLer interface {
	ThreadURL(th Thread) string
}
