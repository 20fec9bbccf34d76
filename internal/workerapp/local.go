package workerapp

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
)

// newLocalBackend builds the confined local backend from the worker's
// settings. The backend names no setting, so a refusal to confine is
// completed here with the one that opts out.
func newLocalBackend(cfg *config.Config, deployment string, log *slog.Logger) (sandbox.Backend, error) {
	b, err := local.New(local.Options{
		// Claims the root for this deployment, so the sweeper only
		// removes workspaces of sessions it can look up.
		Deployment:     deployment,
		Logger:         log,
		Root:           cfg.Sandbox.LocalRoot,
		DefaultTimeout: cfg.Session.CommandTimeout,
		Network:        cfg.Sandbox.LocalNetwork,
		Unconfined:     cfg.Sandbox.LocalUnconfined,
		// No one file may pass the workspace quota (the snapshot checks the
		// whole).
		MaxFileBytes: int64(cfg.Sandbox.WorkspaceQuota),
	})
	if errors.Is(err, local.ErrCannotConfine) {
		return nil, fmt.Errorf("%w; set SANDBOT_SANDBOX_LOCAL_UNCONFINED=true to run local commands unconfined, as the worker's user on the whole host", err)
	}
	return b, err
}
