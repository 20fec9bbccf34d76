package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/e2b"
)

// newDaytonaBackend builds the daytona backend. The key stays in the
// worker: sandboxes are named by ID in workflow state, and every call
// re-reads what it needs from the provider.
func newDaytonaBackend(cfg *config.Config, deployment string, log *slog.Logger) (sandbox.Backend, error) {
	return daytona.New(daytona.Options{
		APIURL: cfg.Daytona.APIURL, APIKey: cfg.Daytona.APIKey, KeySetting: "DAYTONA_API_KEY",
		Target: cfg.Daytona.Target, Snapshot: cfg.Daytona.Snapshot, Image: cfg.Daytona.Image,
		Workdir: cfg.Daytona.Workdir, AutoStop: cfg.Daytona.AutoStop,
		Deployment: cloudDeployment(deployment), DefaultTimeout: cfg.Session.CommandTimeout, Logger: log,
	})
}

// newE2BBackend builds the e2b backend. Its envd access tokens live only
// in the worker's memory and are fetched again after a restart.
func newE2BBackend(cfg *config.Config, deployment string, log *slog.Logger) (sandbox.Backend, error) {
	return e2b.New(e2b.Options{
		APIURL: cfg.E2B.APIURL, APIKey: cfg.E2B.APIKey, KeySetting: "E2B_API_KEY",
		Domain: cfg.E2B.Domain, SandboxURL: cfg.E2B.SandboxURL, Template: cfg.E2B.Template,
		Workdir: cfg.E2B.Workdir, TTL: cfg.E2B.TTL,
		Deployment: cloudDeployment(deployment), DefaultTimeout: cfg.Session.CommandTimeout, Logger: log,
	})
}

// cloudDeployment labels a cloud sandbox with the deployment, or as
// unidentified (never swept) when the worker could not tell it.
func cloudDeployment(deployment string) string {
	if deployment == "" {
		return unidentified
	}
	return deployment
}

// startupCheck is how long a worker waits at start for a backend to
// answer its readiness check.
const startupCheck = 30 * time.Second

// checkAtStart asks a backend that can tell whether it is ready. Refused
// credentials stop the worker: no retry can fix them, and a worker that
// served the backend anyway would fail every session on it. Any other
// answer (a provider outage, a Docker daemon that is down) is logged and
// the backend served: sessions on it then fail with the reason in the
// thread and can move to another backend, and they work again once the
// provider is back.
func checkAtStart(ctx context.Context, b sandbox.Backend, log *slog.Logger) error {
	c, ok := b.(sandbox.Checker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startupCheck)
	defer cancel()
	err := c.Check(ctx)
	switch {
	case errors.Is(err, sandbox.ErrUnauthenticated):
		return fmt.Errorf("backend %s: %w", b.Name(), err)
	case err != nil:
		log.Warn("backend not ready at start; serving it anyway", "backend", b.Name(), "error", err)
	}
	return nil
}
