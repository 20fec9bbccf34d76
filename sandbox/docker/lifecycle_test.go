package docker_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestNewRejectsBadOptions(t *testing.T) {
	cli, err := docker.NewClient("unix:///nonexistent/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts docker.Options
		want string
	}{
		{"root user", docker.Options{User: "0:0"}, "is root"},
		{"named user", docker.Options{User: "sandbox"}, "numeric"},
		{"relative workdir", docker.Options{Workdir: "work"}, "clean absolute path"},
		{"root workdir", docker.Options{Workdir: "/"}, "other than"},
		{"host network", docker.Options{Network: "host"}, "share a namespace"},
		{"container network", docker.Options{Network: "container:abc"}, "share a namespace"},
		{"tiny memory", docker.Options{MemoryBytes: 1 << 20}, "minimum"},
		{"negative timeout", docker.Options{DefaultTimeout: -time.Second}, "must not be negative"},
		{"reserved label", docker.Options{Labels: map[string]string{docker.LabelSession: "x"}}, "set by the backend"},
	} {
		if _, err := docker.New(cli, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := docker.New(cli, docker.Options{}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

// A daemon that is down must not stop New (the worker serves other
// backends); each call then says where it looked. No daemon needed.
func TestDaemonDown(t *testing.T) {
	const host = "unix:///nonexistent/sandbot/docker.sock"
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := docker.New(cli, docker.Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := ctxT(t)
	_, err = b.Create(ctx, sandbox.Spec{SessionID: "s"})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.HasPrefix(err.Error(), "docker: daemon not reachable at "+host+": ") {
		t.Errorf("Create: %v; want sandbox.ErrUnavailable saying \"docker: daemon not reachable at %s: ...\"", err, host)
	}
	h := sandbox.Handle{Backend: docker.Name, ID: "abc", SessionID: "s", Workdir: "/workspace"}
	if alive, err := b.Alive(ctx, h); alive || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Alive: %v, %v; want false and sandbox.ErrUnavailable", alive, err)
	}
	if _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec: %v; want sandbox.ErrUnavailable", err)
	}
	if err := b.Destroy(ctx, h); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Destroy: %v; want sandbox.ErrUnavailable (gone cannot be confirmed)", err)
	}
}

func TestMissingImage(t *testing.T) {
	const image = "sandbot-test/definitely-missing:never"
	b := newBackend(t, docker.Options{Image: image})
	_, err := b.Create(ctxT(t), sandbox.Spec{SessionID: "missing-image"})
	want := `docker: image "` + image + `" is not present on the worker host and cannot be pulled: `
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Create: %v; want sandbox.ErrUnavailable starting %q", err, want)
	}
}

func TestLabelsAndName(t *testing.T) {
	b := newBackend(t, docker.Options{Labels: map[string]string{"team": "infra", "test": "overridden"}})
	h := sandboxtest.NewSandbox(t, b)
	info := inspect(t, h).Container
	want := map[string]string{
		docker.LabelManaged: "true",
		docker.LabelSession: h.SessionID,
		"team":              "infra",
		"test":              "sandboxtest", // Spec.Labels beat Options.Labels
	}
	for k, v := range want {
		if got := info.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	if !strings.HasPrefix(info.Name, "/sandbot-sandboxtest_TestLabelsAndName_") {
		t.Errorf("container name %q does not name the session", info.Name)
	}
	if h.Workdir != docker.DefaultWorkdir || h.Meta["image"] != b.Image() {
		t.Errorf("handle %+v", h)
	}
}

func TestCreateReplacesLeftover(t *testing.T) {
	b := newBackend(t, docker.Options{})
	ctx := ctxT(t)
	spec := sandbox.Spec{SessionID: "replace-" + t.Name()}
	first, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("second Create of the same session: %v", err)
	}
	t.Cleanup(func() { _ = b.Destroy(context.Background(), second) })
	if alive, err := b.Alive(ctx, first); err != nil || alive {
		t.Errorf("first container: Alive = %v, %v; want it replaced", alive, err)
	}
	if got := sandboxtest.Sh(t, b, second, "ls -A"); got != "" {
		t.Errorf("replacement workspace not empty: %q", got)
	}

	// A container of the same name that is not this session's is never
	// removed to make room.
	cli, image := testEnv(t)
	name := strings.TrimPrefix(inspect(t, second).Container.Name, "/")
	if err := b.Destroy(ctx, second); err != nil {
		t.Fatal(err)
	}
	foreign, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: image, Cmd: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), foreign.ID, client.ContainerRemoveOptions{Force: true})
	})
	_, err = b.Create(ctx, spec)
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "in the way") {
		t.Errorf("Create over a foreign container: %v; want sandbox.ErrUnavailable saying it is in the way", err)
	}
	if _, err := cli.ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("foreign container removed: %v", err)
	}
}

func TestSuspendResume(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	ctx := ctxT(t)
	sandboxtest.Sh(t, b, h, "echo kept > f.txt")
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if st := inspect(t, h).Container.State; st.Running {
		t.Fatalf("container still running after Suspend: %s", st.Status)
	}
	if alive, err := b.Alive(ctx, h); err != nil || !alive {
		t.Errorf("Alive while suspended = %v, %v; want true", alive, err)
	}
	// Export reads a stopped container without starting it.
	if entries := exportEntries(t, b, h); len(entries) != 1 || entries["f.txt"].Size != 5 {
		t.Errorf("export while suspended: %v", entries)
	}
	if inspect(t, h).Container.State.Running {
		t.Error("Export started the container")
	}
	if err := b.Resume(ctx, h); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := b.Resume(ctx, h); err != nil {
		t.Fatalf("second Resume: %v", err)
	}
	if got := sandboxtest.Sh(t, b, h, "cat f.txt"); got != "kept\n" {
		t.Errorf("after Resume f.txt = %q", got)
	}
	// Exec starts a stopped container on its own.
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if got := sandboxtest.Sh(t, b, h, "cat f.txt"); got != "kept\n" {
		t.Errorf("Exec on a suspended sandbox: f.txt = %q", got)
	}
}

func TestContainerRemovedBehindTheBackendsBack(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	cli, _ := testEnv(t)
	ctx := ctxT(t)
	if _, err := cli.ContainerRemove(ctx, h.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if alive, err := b.Alive(ctx, h); err != nil || alive {
		t.Errorf("Alive = %v, %v; want false, nil", alive, err)
	}
	for name, err := range map[string]error{
		"Exec":   func() error { _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); return err }(),
		"Resume": b.Resume(ctx, h),
		"Import": b.Import(ctx, h, bytes.NewReader(sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "f", Body: "x"}))),
	} {
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: %v; want sandbox.ErrNotFound", name, err)
		}
	}
	if err := b.Destroy(ctx, h); err != nil {
		t.Errorf("Destroy of a removed container: %v", err)
	}
}

func TestSweepRemovesOrphansOnly(t *testing.T) {
	b := newBackend(t, docker.Options{})
	cli, image := testEnv(t)
	ctx := ctxT(t)
	live := sandboxtest.NewSandbox(t, b)
	orphan := sandboxtest.NewSandbox(t, b)
	unsure := sandboxtest.NewSandbox(t, b)
	// A container of someone else, even with our session label but
	// without the managed label, must survive.
	foreign, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Cmd: []string{"true"}, Labels: map[string]string{docker.LabelSession: orphan.SessionID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), foreign.ID, client.ContainerRemoveOptions{Force: true})
	})
	errUnsure := errors.New("visibility unavailable")
	var asked []string
	removed, err := b.Sweep(ctx, func(session string) (bool, error) {
		asked = append(asked, session)
		switch session {
		case orphan.SessionID:
			return false, nil
		case unsure.SessionID:
			return false, errUnsure
		}
		return true, nil // live, and containers of other tests running now
	})
	if !errors.Is(err, errUnsure) {
		t.Errorf("Sweep error %v, want it to carry the failed alive check", err)
	}
	if !slices.Equal(removed, []string{orphan.ID}) {
		t.Errorf("removed %v, want only the orphan %s", removed, orphan.ID)
	}
	for _, s := range []string{live.SessionID, orphan.SessionID, unsure.SessionID} {
		if !slices.Contains(asked, s) {
			t.Errorf("alive was not asked about %q", s)
		}
	}
	for name, h := range map[string]sandbox.Handle{"live": live, "unsure": unsure} {
		if alive, err := b.Alive(ctx, h); err != nil || !alive {
			t.Errorf("%s sandbox: Alive = %v, %v after Sweep", name, alive, err)
		}
	}
	if alive, _ := b.Alive(ctx, orphan); alive {
		t.Error("orphan still alive after Sweep")
	}
	if _, err := cli.ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("unmanaged container removed: %v", err)
	}
}

func TestSweepStaysWithinItsDeployment(t *testing.T) {
	mine := newBackend(t, docker.Options{Labels: map[string]string{"sandbot.deployment": "ns.queue-a-" + t.Name()}})
	theirs := newBackend(t, docker.Options{Labels: map[string]string{"sandbot.deployment": "ns.queue-b-" + t.Name()}})
	ctx := ctxT(t)
	own := sandboxtest.NewSandbox(t, mine)
	other := sandboxtest.NewSandbox(t, theirs)
	var asked []string
	removed, err := mine.Sweep(ctx, func(session string) (bool, error) {
		asked = append(asked, session)
		return false, nil // every session this deployment can see has ended
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{own.ID}) {
		t.Errorf("removed %v, want only this deployment's %s", removed, own.ID)
	}
	if slices.Contains(asked, other.SessionID) {
		t.Error("the sweeper asked about another deployment's session")
	}
	if alive, err := theirs.Alive(ctx, other); err != nil || !alive {
		t.Errorf("another deployment's sandbox was touched: alive=%v err=%v", alive, err)
	}
}

// Two deployments on one daemon can have a session of the same ID (two
// chaos stacks replaying one seed did: their soaks lost 11 to 22 completed
// changes each, all in their docker turns). Neither's Create may take the
// other's container as its own leftover: before container names counted
// the deployment, the second Create removed the first's live sandbox.
func TestCreateLeavesAnotherDeploymentsSandbox(t *testing.T) {
	mine := newBackend(t, docker.Options{Labels: map[string]string{"sandbot.deployment": "cluster-a/ns/queue-" + t.Name()}})
	theirs := newBackend(t, docker.Options{Labels: map[string]string{"sandbot.deployment": "cluster-b/ns/queue-" + t.Name()}})
	ctx := ctxT(t)
	spec := sandbox.Spec{SessionID: "session/slack/T/C/1700000000.000700-" + t.Name()}
	own, err := mine.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mine.Destroy(context.Background(), own) })
	sandboxtest.Sh(t, mine, own, "echo kept > f.txt")
	other, err := theirs.Create(ctx, spec)
	if err != nil {
		t.Fatalf("the other deployment's Create of the same session: %v", err)
	}
	t.Cleanup(func() { _ = theirs.Destroy(context.Background(), other) })
	if alive, err := mine.Alive(ctx, own); err != nil || !alive {
		t.Fatalf("this deployment's sandbox after the other's Create: Alive = %v, %v; want it untouched", alive, err)
	}
	if got := sandboxtest.Sh(t, mine, own, "cat f.txt"); got != "kept\n" {
		t.Errorf("this deployment's workspace reads %q, want its file", got)
	}
	if own.Meta["name"] == other.Meta["name"] {
		t.Errorf("both deployments' containers are named %q", own.Meta["name"])
	}

	// A container of this deployment's name and session that another
	// deployment labelled is not a leftover of ours either.
	cli, image := testEnv(t)
	name := own.Meta["name"]
	if err := mine.Destroy(ctx, own); err != nil {
		t.Fatal(err)
	}
	foreign, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: &container.Config{Image: image, Cmd: []string{"true"},
		Labels: map[string]string{docker.LabelManaged: "true", docker.LabelSession: spec.SessionID, "sandbot.deployment": "cluster-c/ns/queue"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), foreign.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := mine.Create(ctx, spec); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "in the way") {
		t.Errorf("Create over another deployment's container: %v; want sandbox.ErrUnavailable saying it is in the way", err)
	}
	if _, err := cli.ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another deployment's container removed: %v", err)
	}
}
