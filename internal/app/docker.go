package app

import (
	"context"
	"errors"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
)

// newDockerBackend is wired once sandbox/docker lands.
func newDockerBackend(ctx context.Context, cfg *config.Config) (sandbox.Backend, error) {
	return nil, errors.New("docker: not wired yet")
}
