package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/logging"
)

// Connect is the shared start of cmd/worker and cmd/bot: load and validate
// the configuration for role, set up logging, and dial Temporal. The caller
// closes the client.
func Connect(ctx context.Context, role config.Role) (*config.Config, *slog.Logger, client.Client, error) {
	cfg := config.Load()
	if err := cfg.Validate(role); err != nil {
		return nil, nil, nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := logging.New(os.Stderr, cfg.LogLevel)
	c, err := client.DialContext(ctx, client.Options{
		HostPort: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace,
		Logger: logging.Temporal(log.With("component", "temporal")),
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to Temporal at %s (SANDBOT_TEMPORAL_ADDRESS): %w", cfg.Temporal.Address, err)
	}
	return cfg, log, c, nil
}
