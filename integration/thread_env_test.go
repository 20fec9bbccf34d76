package integration

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/testimage"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/session"
)

// This file holds threadEnv, the harness of the workspace, fork, session
// list and Docker tests: a poster that can open threads (so /fork works
// through the chat core) and keeps track of which thread each text went
// to, the Docker set-up, and small helpers to run a turn and read one
// command's output.

// threadPoster is a recPoster that also implements chat.ThreadStarter and
// remembers the thread and time of every text it posted.
type threadPoster struct {
	*recPoster
	mu     sync.Mutex
	said   []saidText
	forks  int
	opened []chat.Thread
}

type saidText struct {
	Thread chat.Thread
	Text   string
	At     time.Time
}

var _ chat.ThreadStarter = (*threadPoster)(nil)

func newThreadPoster() *threadPoster { return &threadPoster{recPoster: newRecPoster()} }

func (p *threadPoster) PostText(ctx context.Context, th chat.Thread, md string) (string, error) {
	p.mu.Lock()
	p.said = append(p.said, saidText{Thread: th, Text: md, At: time.Now()})
	p.mu.Unlock()
	// Recorded first, so whoever the recPoster wakes sees it.
	return p.recPoster.PostText(ctx, th, md)
}

// StartThread opens a new thread in the same channel, as a Discord thread
// or a Slack channel message would.
func (p *threadPoster) StartThread(_ context.Context, from chat.Thread, title string) (chat.Thread, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forks++
	th := chat.Thread{Platform: from.Platform, Workspace: from.Workspace, Channel: from.Channel,
		Thread: fmt.Sprintf("%s-fork-%d", from.Thread, p.forks)}
	p.opened = append(p.opened, th)
	return th, nil
}

// lastOpened returns the thread StartThread opened last.
func (p *threadPoster) lastOpened(t testing.TB) chat.Thread {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.opened) == 0 {
		t.Fatal("no thread was opened")
	}
	return p.opened[len(p.opened)-1]
}

// textsIn returns what was posted as text in th, oldest first.
func (p *threadPoster) textsIn(th chat.Thread) []saidText {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []saidText
	for _, s := range p.said {
		if s.Thread == th {
			out = append(out, s)
		}
	}
	return out
}

// waitText waits for a text in th containing every one of parts and
// returns it.
func (p *threadPoster) waitText(t testing.TB, th chat.Thread, parts ...string) saidText {
	t.Helper()
	var got saidText
	p.waitFor(t, fmt.Sprintf("a text in %s containing %q", th.Thread, parts), func([]posted, []string) bool {
		for _, s := range p.textsIn(th) {
			ok := true
			for _, part := range parts {
				ok = ok && strings.Contains(s.Text, part)
			}
			if ok {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// threadEnv is a stack driven through threadPoster, with its threads in a
// channel of its own (so session lists and container clean-up never see
// another test's sessions), and optionally the Docker backend.
type threadEnv struct {
	*stack
	p       *threadPoster
	channel string
	// docker and image are set when the stack serves the docker backend.
	docker *client.Client
	image  string
}

// newThreadEnv starts a stack. withDocker adds the docker backend with the local
// test image (skipping, or failing under CI, when no daemon answers).
func newThreadEnv(t testing.TB, withDocker bool, opts ...stackOption) *threadEnv {
	t.Helper()
	e := &threadEnv{p: newThreadPoster(), channel: "te-" + nonWord.ReplaceAllString(t.Name(), "-")}
	if withDocker {
		e.docker, e.image = requireDocker(t)
		// Registered before the stack, so it runs after the worker has
		// stopped: nothing can create a container behind it.
		t.Cleanup(func() { e.removeContainers(t) })
		opts = append([]stackOption{func(c *config.Config) {
			c.Sandbox.Backends = []string{"local", "docker"}
			c.Docker.Image = e.image
			c.Docker.Workdir = docker.DefaultWorkdir
		}}, opts...)
	}
	e.stack = newStack(t, opts...)
	return e
}

func (e *threadEnv) thread(name string) chat.Thread {
	return chat.Thread{Platform: "console", Channel: e.channel, Thread: name}
}

// send hands a message (or command) from u to the core through e.p.
func (e *threadEnv) send(th chat.Thread, u chat.User, eventID, text string) {
	e.t.Helper()
	if err := e.core.HandleMessage(e.ctx, e.p, chat.Message{EventID: eventID, Thread: th, User: u, Text: text}); err != nil {
		e.t.Fatalf("HandleMessage(%q): %v", text, err)
	}
}

// command sends a command as alice and returns the reply the core posted
// in the thread (commands are answered before HandleMessage returns).
func (e *threadEnv) command(th chat.Thread, text string) string {
	e.t.Helper()
	before := len(e.p.textsIn(th))
	e.send(th, alice, "cmd-"+text, text)
	after := e.p.textsIn(th)
	if len(after) <= before {
		e.t.Fatalf("%s: no reply in the thread", text)
	}
	return after[len(after)-1].Text
}

// turn queues the model's steps, sends text as alice and waits for turn n
// of th to end, approving any call it asks about.
func (e *threadEnv) turn(th chat.Thread, n int, text string, steps ...fakeopenai.Step) session.TurnState {
	e.t.Helper()
	e.model.Push(steps...)
	e.send(th, alice, fmt.Sprintf("ev-%s-%d", th.Thread, n), text)
	for {
		ts := e.waitState(th, fmt.Sprintf("turn %d of %s to end or ask", n, th.Thread), func(ts session.TurnState) bool {
			return ts.Turn == n && (done(ts) || ts.Pending != nil)
		})
		if done(ts) {
			return ts
		}
		if err := e.approve(th, ts.Pending.CallID, session.DecisionApprove, alice, ""); err != nil {
			e.t.Fatalf("approve %s: %v", ts.Pending.CallID, err)
		}
	}
}

// cmdOut returns what one command of a finished call printed (stdout and
// stderr as rendered for the model), and fails the test unless it exited 0.
func cmdOut(t testing.TB, c session.ToolCallState, cmd string) string {
	t.Helper()
	head := "$ " + cmd + "\n"
	i := strings.Index(c.Output, head)
	if i < 0 {
		t.Fatalf("command %q not in the output of call %s: %s", cmd, c.CallID, dump(c))
	}
	block := c.Output[i+len(head):]
	if j := strings.Index(block, "\n$ "); j >= 0 {
		block = block[:j]
	}
	k := strings.LastIndex(block, "exit code: ")
	if k < 0 || strings.TrimSpace(block[k:]) != "exit code: 0" {
		t.Fatalf("command %q did not exit 0: %q (call %s)", cmd, block, dump(c))
	}
	return strings.TrimSuffix(block[:k], "\n")
}

// onlyCall returns the only tool call of a finished turn and checks it ran.
func onlyCall(t testing.TB, ts session.TurnState) session.ToolCallState {
	t.Helper()
	if len(ts.ToolCalls) != 1 || ts.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("want one completed tool call, turn state: %s", dump(ts))
	}
	return ts.ToolCalls[0]
}

func hasNotice(ts session.TurnState, parts ...string) bool {
	for _, n := range ts.Notices {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// Docker.

// requireDocker returns a client for the Docker daemon and the local test
// image (internal/testimage: busybox, uid 1000, nothing pulled). Without a
// daemon it skips the test, except under CI=true, where it fails.
func requireDocker(t testing.TB) (*client.Client, string) {
	t.Helper()
	return testimage.Require(t)
}

// containersOf lists the containers (any state) labelled as the session's.
func (e *threadEnv) containersOf(th chat.Thread) []container.Summary {
	e.t.Helper()
	res, err := e.docker.ContainerList(e.ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", docker.LabelSession+"="+th.ID()),
	})
	if err != nil {
		e.t.Fatalf("list containers of %s: %v", th.ID(), err)
	}
	return res.Items
}

// containerOf returns the session's one container.
func (e *threadEnv) containerOf(th chat.Thread) container.Summary {
	e.t.Helper()
	cs := e.containersOf(th)
	if len(cs) != 1 {
		e.t.Fatalf("session %s has %d containers, want 1: %s", th.ID(), len(cs), dump(cs))
	}
	return cs[0]
}

func (e *threadEnv) inspect(id string) *container.State {
	e.t.Helper()
	res, err := e.docker.ContainerInspect(e.ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		e.t.Fatalf("inspect %s: %v", id, err)
	}
	if res.Container.State == nil {
		e.t.Fatalf("container %s has no state", id)
	}
	return res.Container.State
}

// waitContainer polls the container's state until cond holds.
func (e *threadEnv) waitContainer(id, what string, cond func(*container.State) bool) *container.State {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last *container.State
	for time.Now().Before(deadline) {
		last = e.inspect(id)
		if cond(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for container %s: %s; last state %s", id, what, dump(last))
	return nil
}

// removeContainers removes every container of this test's sessions.
func (e *threadEnv) removeContainers(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.docker.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", docker.LabelManaged+"=true"),
	})
	if err != nil {
		t.Logf("clean-up: list containers: %v", err)
		return
	}
	for _, c := range res.Items {
		if !strings.Contains(c.Labels[docker.LabelSession], "/"+e.channel+"/") {
			continue
		}
		if _, err := e.docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Logf("clean-up: remove %s: %v", c.ID, err)
		}
	}
}

// fileInContainer reads a regular file out of the container through the
// Engine API (not through the session), so a test sees what is really on
// the container's disk.
func (e *threadEnv) fileInContainer(id, path string) string {
	e.t.Helper()
	res, err := e.docker.CopyFromContainer(e.ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		e.t.Fatalf("copy %s out of container %s: %v", path, id, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err != nil || hdr.Typeflag != tar.TypeReg {
		e.t.Fatalf("copy %s out of container %s: no regular file (%v, %+v)", path, id, err, hdr)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// toolResultFor returns the tool result the model was last shown for a
// call ("" if it never was).
func toolResultFor(m *fakeopenai.Server, callID string) string {
	reqs := m.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		for _, msg := range reqs[i].Body.Messages {
			if msg.Role == "tool" && msg.ToolCallID == callID {
				return msg.Content
			}
		}
	}
	return ""
}

// snapshotExists asks the stack's snapshot store whether key exists.
func (e *threadEnv) snapshotExists(key string) bool {
	e.t.Helper()
	st, err := blobstore.Open(e.ctx, e.cfg.Sandbox.SnapshotURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	ok, err := st.Exists(e.ctx, key)
	if err != nil {
		e.t.Fatalf("snapshot %s: %v", key, err)
	}
	return ok
}
