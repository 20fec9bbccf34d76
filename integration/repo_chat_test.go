package integration

import (
	"strings"
	"testing"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/internal/fake/fakegit"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
)

// The repository loop from Slack: a mention names the repository, "!diff"
// posts the summary and shares the patch as a file in the thread, "!pr"
// opens a pull request whose body links back to the thread.
func TestSlackRepoLoop(t *testing.T) {
	opt, git, gh := repoFakes(t, fakegit.Options{})
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals, opt}})
	e.s.model.Push(fakeopenai.ToolCallStep("s1", "shell", shell("echo fixed >> README.md")), fakeopenai.FinalStep("Fixed the README."))
	th, _ := e.mention(slackAlice, "acme/widgets: fix the readme")
	e.waitDone(th, 1)

	e.reply(th, slackAlice, "!diff")
	e.waitBotText(th, "the /diff answer", nil, "1 file changed", "`README.md` modified")
	files := threadFiles(e.f.Snapshot(), th)
	if len(files) != 1 || files[0].Name != "session.diff" || !strings.Contains(string(files[0].Content), "+fixed") {
		t.Fatalf("files shared in the thread: %+v", files)
	}

	e.reply(th, slackAlice, "!pr Fix the readme")
	e.waitBotText(th, "the /pr answer", nil, "Opened pull request", "https://github.example/acme/widgets/pull/1")
	prs := gh.PRs("acme/widgets")
	if len(prs) != 1 || prs[0].Title != "Fix the readme" || !strings.Contains(prs[0].Body, "/archives/"+th.Channel+"/p") {
		t.Fatalf("GitHub has %+v; the body should link to the Slack thread", prs)
	}
	if got := git.Show(t, "acme/widgets", prs[0].Head, "README.md"); got != "# widgets\nfixed\n" {
		t.Fatalf("README.md on %s = %q", prs[0].Head, got)
	}
}

// The repository loop from Discord's slash commands: /repo with its
// options on a session that has none, /diff attaching the patch, /pr with
// a title.
func TestDiscordRepoLoop(t *testing.T) {
	opt, _, gh := repoFakes(t, fakegit.Options{})
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{noApprovals, opt}})
	e.s.model.Push(fakeopenai.FinalStep("Hello."))
	th := e.mention(discordAlice, "hello")
	e.waitDone(th, 1)

	id := e.slash(th, discordAlice, "repo", fakediscord.CommandOption{Name: "repository", Value: "acme/widgets"}, fakediscord.CommandOption{Name: "branch", Value: "main"})
	if m := e.discordAnswer(id); !strings.Contains(m.Content, "This session now works on **acme/widgets** (main @") {
		t.Fatalf("/repo answered %q", m.Content)
	}

	e.s.model.Push(fakeopenai.ToolCallStep("d1", "shell", shell("echo fixed >> README.md")), fakeopenai.FinalStep("Fixed."))
	e.say(th, discordAlice, "fix the readme")
	e.waitDone(th, 2)

	id = e.slash(th, discordAlice, "diff")
	if m := e.discordAnswer(id); !strings.Contains(m.Content, "1 file changed") {
		t.Fatalf("/diff answered %q", m.Content)
	}
	var patch string
	for _, m := range e.f.Messages(th.Thread) {
		for _, a := range m.Attachments {
			if a.Filename == "session.diff" {
				patch = string(a.Data)
			}
		}
	}
	if !strings.Contains(patch, "+fixed") {
		t.Fatalf("no patch attached in the thread (got %q)", patch)
	}

	id = e.slash(th, discordAlice, "pr", fakediscord.CommandOption{Name: "title", Value: "Fix the readme"})
	if m := e.discordAnswer(id); !strings.Contains(m.Content, "Opened pull request [#1](https://github.example/acme/widgets/pull/1)") {
		t.Fatalf("/pr answered %q", m.Content)
	}
	if prs := gh.PRs("acme/widgets"); len(prs) != 1 || prs[0].Title != "Fix the readme" || !strings.Contains(prs[0].Body, "https://discord.com/channels/") {
		t.Fatalf("GitHub has %+v", prs)
	}
}

// The checkout works on the cloud backends too: a repository session
// moved to E2B and forked onto Daytona runs git there, and /pr pushes what
// changed on the cloud sandbox.
func TestRepoOnCloudBackends(t *testing.T) {
	cl := startClouds(t)
	e := newRepoEnv(t, false, noApprovals, cl.withClouds)
	th := e.thread("repo-cloud")
	e.turn(th, 1, "acme/widgets: look", fakeopenai.ToolCallStep("c0", "shell", shell("true")), fakeopenai.FinalStep("looked"))
	if r := e.command(th, "/backend e2b"); !strings.Contains(r, "to **e2b**") {
		t.Fatalf("/backend e2b replied %q", r)
	}
	ts := e.turn(th, 2, "edit on e2b", fakeopenai.ToolCallStep("c1", "shell", shell("git status --short", "echo e2b >> README.md", "git diff --stat")), fakeopenai.FinalStep("edited"))
	if c := onlyCall(t, ts); ts.Backend != "e2b" || !strings.Contains(cmdOut(t, c, "git diff --stat"), "README.md") {
		t.Fatalf("git on e2b: %s", dump(ts))
	}
	fork := e.fork(th, `/fork "on daytona" daytona`, 2, "daytona")
	ts = e.turn(fork, 1, "edit on daytona", fakeopenai.ToolCallStep("c2", "shell", shell("git log --oneline", "echo daytona > d.txt")), fakeopenai.FinalStep("edited"))
	if c := onlyCall(t, ts); ts.Backend != "daytona" || cmdOut(t, c, "git log --oneline") == "" {
		t.Fatalf("git on daytona: %s", dump(ts))
	}
	if r := e.cmd(fork, alice, "/pr from daytona"); !strings.Contains(r, "Opened pull request") {
		t.Fatalf("/pr replied %q", r)
	}
	head := e.gh.PRs("acme/widgets")[0].Head
	if got := e.git.Show(t, "acme/widgets", head, "README.md"); got != "# widgets\ne2b\n" {
		t.Fatalf("README.md on %s = %q", head, got)
	}
	if got := e.git.Show(t, "acme/widgets", head, "d.txt"); got != "daytona\n" {
		t.Fatalf("d.txt on %s = %q", head, got)
	}
}
