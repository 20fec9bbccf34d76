package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// LabelDeployment marks which sandbot deployment a container belongs to
// (see DeploymentID).
const LabelDeployment = "sandbot.deployment"

// unidentified labels the containers of a worker that could not learn its
// deployment's identity; no sweeper ever removes them.
const unidentified = "unidentified"

// DeploymentID names one sandbot installation: its Temporal cluster's ID
// (a UUID the cluster generates when its store is created), namespace and
// session task queue. Two installations left at the default namespace and
// queue on one Docker host still differ, so neither's sweeper can mistake
// the other's live containers for orphans: a workflow unknown to this
// cluster says nothing about another cluster's sessions.
func DeploymentID(ctx context.Context, c client.Client, namespace, taskQueue string) (string, error) {
	resp, err := c.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("temporal cluster info: %w", err)
	}
	if resp.GetClusterId() == "" {
		return "", errors.New("temporal cluster info: the cluster has no ID")
	}
	return resp.GetClusterId() + "/" + namespace + "/" + taskQueue, nil
}

// newDockerBackend builds the docker backend. It does not contact the
// daemon: a daemon that is down shows up per session as a clear error in
// the thread, and the session stays usable on another backend.
func newDockerBackend(_ context.Context, cfg *config.Config, deployment string, log *slog.Logger) (sandbox.Backend, error) {
	if deployment == "" {
		deployment = unidentified
	}
	cli, err := docker.NewClient("")
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return docker.New(cli, docker.Options{
		Image: cfg.Docker.Image, PullMissing: cfg.Docker.PullMissing, Workdir: cfg.Docker.Workdir,
		Network: cfg.Docker.Network, CPUs: cfg.Docker.Cpus, MemoryBytes: int64(cfg.Docker.Memory), PidsLimit: cfg.Docker.PidsLimit,
		User: cfg.Docker.User, DefaultTimeout: cfg.Session.CommandTimeout,
		// No one file may pass the workspace quota (the snapshot checks the
		// whole).
		MaxFileBytes: int64(cfg.Sandbox.WorkspaceQuota),
		// Names the deployment, so the orphan sweeper only touches the
		// containers of sessions it can look up.
		Labels: map[string]string{LabelDeployment: deployment},
		// The worker's logger, so nothing prints into cmd/dev's terminal.
		Logger: log,
	})
}
