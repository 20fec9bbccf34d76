package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	mem, err := parseBytes(cfg.Docker.Memory)
	if err != nil {
		return nil, fmt.Errorf("SANDBOT_DOCKER_MEMORY: %w", err)
	}
	cli, err := docker.NewClient("")
	if err != nil {
		return nil, err
	}
	return docker.New(cli, docker.Options{
		Image: cfg.Docker.Image, PullMissing: cfg.Docker.PullMissing, Workdir: cfg.Docker.Workdir,
		Network: cfg.Docker.Network, CPUs: cfg.Docker.Cpus, MemoryBytes: mem, PidsLimit: cfg.Docker.PidsLimit,
		User: cfg.Docker.User, DefaultTimeout: cfg.Session.CommandTimeout,
		// Names the deployment, so the orphan sweeper only touches the
		// containers of sessions it can look up.
		Labels: map[string]string{LabelDeployment: cfg.Temporal.Namespace + "." + cfg.Temporal.TaskQueue},
	})
}

// parseBytes reads sizes like 512m, 1g, 1.5G or a plain byte count.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, nil
	}
	mult := float64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, strings.TrimSuffix(s, "g")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size; use bytes or a number with k, m or g, e.g. 1g", s)
	}
	return int64(v * mult), nil
}
