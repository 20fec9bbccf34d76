package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// keepalive is the container's main process: it only has to stay up, in
// any image (busybox's sleep has no "infinity"), for about 68 years.
var keepalive = []string{"sleep", "2147483647"}

// stopGrace is how long Suspend and Destroy give the container to stop.
const stopGrace = 5 * time.Second

// cleanupTimeout bounds cleanup calls made after the caller's context is
// done (killing a command, removing a half-created container).
const cleanupTimeout = 15 * time.Second

// containerName derives the container's name from the session ID and the
// backend's own labels (Options.Labels: the worker's names its deployment):
// readable (the session ID, sanitized, shortened) and unique (a hash of the
// full ID and those labels). Being deterministic, a retried Create finds and
// replaces the container of its earlier attempt instead of leaking a second
// one. The labels are in the hash because container names are global to a
// daemon: two sandbot deployments sharing one can both have a session of
// the same ID (the same Slack thread, or two test stacks replaying one
// seed), and with the session's name alone each one's Create replaced the
// other's live container, whose session then lost every change since its
// last snapshot. With no labels the name is what it always was.
func containerName(sessionID string, labels map[string]string) string {
	h := sha256.New()
	h.Write([]byte(sessionID))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		// NUL cannot occur in a label, so the encoding is unambiguous.
		h.Write([]byte("\x00" + k + "\x00" + labels[k]))
	}
	sum := h.Sum(nil)
	var b strings.Builder
	b.WriteString("sandbot-")
	for _, r := range sessionID {
		if b.Len() >= 48 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + "-" + hex.EncodeToString(sum[:6])
}

// Create starts a fresh container for spec.SessionID with an empty
// workspace owned by the sandbox user. A container left over from an
// earlier Create of the same session in this deployment is removed first.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if spec.SessionID == "" {
		return sandbox.Handle{}, errors.New("docker: create: empty session ID")
	}
	if err := b.ensureImage(ctx); err != nil {
		return sandbox.Handle{}, err
	}
	labels := make(map[string]string, len(b.opts.Labels)+len(spec.Labels)+2)
	maps.Copy(labels, b.opts.Labels)
	maps.Copy(labels, spec.Labels)
	labels[LabelManaged] = "true"
	labels[LabelSession] = spec.SessionID

	useInit := true
	res := container.Resources{Memory: max(b.opts.MemoryBytes, 0)}
	if b.opts.MemoryBytes > 0 {
		res.MemorySwap = b.opts.MemoryBytes
	}
	if b.opts.CPUs > 0 {
		res.NanoCPUs = int64(b.opts.CPUs * 1e9)
	}
	if b.opts.PidsLimit > 0 {
		pids := b.opts.PidsLimit
		res.PidsLimit = &pids
	}
	if n := b.opts.MaxFileBytes; n > 0 {
		res.Ulimits = []*container.Ulimit{{Name: "fsize", Soft: n, Hard: n}}
	}
	name := containerName(spec.SessionID, b.opts.Labels)
	opts := client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:      b.opts.Image,
			Entrypoint: keepalive[:1],
			Cmd:        keepalive[1:],
			User:       b.opts.User,
			WorkingDir: b.opts.Workdir,
			Hostname:   "sandbox",
			Labels:     labels,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:   container.NetworkMode(b.opts.Network),
			CapDrop:       []string{"ALL"},
			SecurityOpt:   []string{"no-new-privileges"},
			Init:          &useInit,
			Resources:     res,
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		},
	}
	created, err := b.cli.ContainerCreate(ctx, opts)
	if cerrdefs.IsConflict(err) {
		if rerr := b.removeLeftover(ctx, name, spec.SessionID, labels); rerr != nil {
			return sandbox.Handle{}, rerr
		}
		created, err = b.cli.ContainerCreate(ctx, opts)
	}
	if err != nil {
		return sandbox.Handle{}, b.unavailable("create", err)
	}
	h := sandbox.Handle{
		Backend:   Name,
		ID:        created.ID,
		SessionID: spec.SessionID,
		Workdir:   b.opts.Workdir,
		Meta:      map[string]string{"image": b.opts.Image, "name": name, "user": b.opts.User},
	}
	if err := b.prepare(ctx, created.ID); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, rerr := b.cli.ContainerRemove(cctx, created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			b.log.Warn("docker: cannot remove half-created container", "sandbox", created.ID, "error", rerr)
		}
		return sandbox.Handle{}, err
	}
	b.log.Info("docker: sandbox created", "sandbox", created.ID, "container", name, "image", b.opts.Image, "workflow_id", spec.SessionID)
	return h, nil
}

// removeLeftover removes the container holding our name: one of a retried
// Create, or a sandbox the session lost track of. Create promises a fresh
// sandbox, so it goes, but only if its labels say it is this session's and
// this deployment's (the backend's own labels, with the values labels, the
// new container's, gives them): another deployment's container is its live
// sandbox, never a leftover of ours.
func (b *Backend) removeLeftover(ctx context.Context, name, sessionID string, labels map[string]string) error {
	info, err := b.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil // removed meanwhile
	}
	if err != nil {
		return b.classify("create: inspect leftover container", err)
	}
	if cfg := info.Container.Config; cfg == nil || cfg.Labels[LabelManaged] != "true" || cfg.Labels[LabelSession] != sessionID || !sameDeployment(cfg.Labels, labels, b.opts.Labels) {
		return &userError{
			msg:      fmt.Sprintf("docker: create: a container named %q that sandbot did not make for this session is in the way", name),
			sentinel: sandbox.ErrUnavailable,
			cause:    errors.New("container name conflict"),
		}
	}
	b.log.Info("docker: replacing leftover container", "container", name, "workflow_id", sessionID)
	_, err = b.cli.ContainerRemove(ctx, info.Container.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return b.classify("create: remove leftover container", err)
	}
	return nil
}

// sameDeployment reports whether a container's labels (have) carry every
// one of the backend's own label keys with the value a new container gets
// (want, the merged labels of Create).
func sameDeployment(have, want, own map[string]string) bool {
	for k := range own {
		if have[k] != want[k] {
			return false
		}
	}
	return true
}

// prepare makes the workspace directory owned by the sandbox user and
// starts the container. The daemon extracts the archive with full rights,
// so no capability is needed inside the container for the chown.
func (b *Backend) prepare(ctx context.Context, id string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir,
		Name:     strings.TrimPrefix(b.opts.Workdir, "/") + "/",
		Mode:     0o755,
		Uid:      b.uid,
		Gid:      b.gid,
		ModTime:  time.Now(),
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("docker: create: workspace archive: %w", err)
	}
	if _, err := b.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf}); err != nil {
		return b.unavailable("create: make workspace", err)
	}
	if _, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return b.unavailable("create: start", err)
	}
	return nil
}

// unavailable classifies a failure to make a new sandbox. Besides an
// unreachable daemon, the usual causes are host configuration (a network
// that does not exist, limits the host cannot apply, an image without
// sleep) that no retry fixes, so they too wrap sandbox.ErrUnavailable: the
// user is told, and the session can move to another backend.
func (b *Backend) unavailable(op string, err error) error {
	if unreachable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return b.classify(op, err)
	}
	return &userError{
		msg:      fmt.Sprintf("docker: cannot start a sandbox container from image %q: %v", b.opts.Image, err),
		sentinel: sandbox.ErrUnavailable,
		cause:    err,
	}
}

// Check implements sandbox.Checker: the daemon answers, and the image is
// on the host or may be pulled.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.cli.ImageInspect(ctx, b.opts.Image)
	switch {
	case err == nil, cerrdefs.IsNotFound(err) && b.opts.PullMissing:
		return nil
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker: image %q is not on the host and pulls are disabled", b.opts.Image)
	}
	return fmt.Errorf("docker: daemon at %s: %w", b.cli.DaemonHost(), err)
}

// ensureImage checks that the image is on the host, pulling it only when
// allowed. Its errors are meant for the user: the session stays usable on
// another backend.
func (b *Backend) ensureImage(ctx context.Context) error {
	img := b.opts.Image
	_, err := b.cli.ImageInspect(ctx, img)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return b.classify("create: inspect image", err)
	}
	if !b.opts.PullMissing {
		return &userError{
			msg: fmt.Sprintf("docker: image %q is not present on the worker host and cannot be pulled: automatic pulls are disabled "+
				"(run \"docker pull %s\" on the worker, or enable pulling)", img, img),
			sentinel: sandbox.ErrUnavailable,
			cause:    err,
		}
	}
	b.log.Info("docker: pulling image", "image", img)
	pull, err := b.cli.ImagePull(ctx, img, client.ImagePullOptions{})
	if err == nil {
		err = pull.Wait(ctx)
		pull.Close()
	}
	if err != nil {
		if unreachable(err) {
			return b.classify("create: pull image", err)
		}
		return &userError{
			msg:      fmt.Sprintf("docker: image %q is not present on the worker host and cannot be pulled: %v", img, err),
			sentinel: sandbox.ErrUnavailable,
			cause:    err,
		}
	}
	return nil
}

// Destroy removes the container and everything in it. A container that is
// already gone is not an error.
func (b *Backend) Destroy(ctx context.Context, h sandbox.Handle) error {
	id, _, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: destroy: %w", err)
	}
	_, err = b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	// A conflict here means a removal is already under way.
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return b.classify("destroy", err)
	}
	b.mu.Lock()
	delete(b.reaped, id)
	b.mu.Unlock()
	b.log.Info("docker: sandbox destroyed", "sandbox", id, "workflow_id", h.SessionID)
	return nil
}

// Alive reports whether the container exists and can run commands: it may
// be running, or stopped or paused (Exec starts it again). A container that
// is being removed or is dead is not alive.
func (b *Backend) Alive(ctx context.Context, h sandbox.Handle) (bool, error) {
	id, _, err := b.container(h)
	if err != nil {
		return false, fmt.Errorf("docker: alive: %w", err)
	}
	info, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, b.classify("alive", err)
	}
	st := info.Container.State
	if st == nil {
		return false, nil
	}
	switch st.Status {
	case container.StateRemoving, container.StateDead:
		return false, nil
	}
	return true, nil
}

// Suspend stops the container; its workspace stays on the daemon's disk.
func (b *Backend) Suspend(ctx context.Context, h sandbox.Handle) error {
	id, _, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: suspend: %w", err)
	}
	secs := int(stopGrace / time.Second)
	if _, err := b.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return b.classify("suspend", err)
	}
	b.log.Info("docker: sandbox suspended", "sandbox", id, "workflow_id", h.SessionID)
	return nil
}

// Resume starts a suspended container again. Resuming a running one is a
// no-op.
func (b *Backend) Resume(ctx context.Context, h sandbox.Handle) error {
	id, _, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: resume: %w", err)
	}
	return b.ensureRunning(ctx, "resume", id)
}

// ensureRunning starts (or unpauses) the container if it is not running.
func (b *Backend) ensureRunning(ctx context.Context, op, id string) error {
	info, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return b.classify(op, err)
	}
	st := info.Container.State
	switch {
	case st == nil:
		return fmt.Errorf("docker: %s: container %s has no state", op, id)
	case st.Status == container.StateRemoving || st.Status == container.StateDead:
		return &userError{
			msg:      fmt.Sprintf("docker: %s: the sandbox container is %s", op, st.Status),
			sentinel: sandbox.ErrNotFound,
			cause:    fmt.Errorf("container %s is %s", id, st.Status),
		}
	case st.Paused:
		_, err = b.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	case !st.Running:
		_, err = b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
		if err == nil {
			b.log.Info("docker: sandbox started again", "sandbox", id)
		}
	}
	if err != nil {
		return b.classify(op, err)
	}
	return nil
}
