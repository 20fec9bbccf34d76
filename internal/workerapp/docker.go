package workerapp

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
)

// LabelDeployment marks which sandbot deployment (Temporal namespace and
// session task queue) a container belongs to.
const LabelDeployment = "sandbot.deployment"

// newDockerBackend builds the docker backend. It does not contact the
// daemon: a daemon that is down shows up per session as a clear error in
// the thread, and the session stays usable on another backend.
func newDockerBackend(_ context.Context, cfg *config.Config) (sandbox.Backend, error) {
	cli, err := docker.NewClient("")
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return docker.New(cli, docker.Options{
		Image: cfg.Docker.Image, PullMissing: cfg.Docker.PullMissing, Workdir: cfg.Docker.Workdir,
		Network: cfg.Docker.Network, CPUs: cfg.Docker.Cpus, MemoryBytes: int64(cfg.Docker.Memory), PidsLimit: cfg.Docker.PidsLimit,
		User: cfg.Docker.User, DefaultTimeout: cfg.Session.CommandTimeout,
		// Names the deployment, so the orphan sweeper only touches the
		// containers of sessions it can look up.
		Labels: map[string]string{LabelDeployment: cfg.Temporal.Namespace + "." + cfg.Temporal.TaskQueue},
	})
}
