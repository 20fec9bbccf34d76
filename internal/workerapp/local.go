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
func newLocalBackend(cfg *config.Config, log *slog.Logger) (sandbox.Backend, error) {
	b, err := local.New(local.Options{
		Logger:         log,
		Root:           cfg.Sandbox.LocalRoot,
		DefaultTimeout: cfg.Session.CommandTimeout,
		Network:        cfg.Sandbox.LocalNetwork,
		Unconfined:     cfg.Sandbox.LocalUnconfined,
	})
	if errors.Is(err, local.ErrCannotConfine) {
		return nil, fmt.Errorf("%w; set SANDBOT_SANDBOX_LOCAL_UNCONFINED=true to run local commands unconfined, as the worker's user on the whole host", err)
	}
	return b, err
}
