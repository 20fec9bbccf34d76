package workerapp

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"log/slog"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/repo"
	"github.com/sandbot/sandbot/repo/github"
	"github.com/sandbot/sandbot/sandbox"
)

// repoActivities builds the repository loop's activities from the
// worker's configuration: its credentials (a token, or a GitHub App whose
// installation tokens it mints) stay in this process.
func repoActivities(cfg *config.Config, store sandbox.SnapshotStore, red *redact.Redactor, known []redact.Secret, log *slog.Logger) (*repo.Activities, error) {
	var tokens github.TokenSource
	hc := &http.Client{Timeout: 30 * time.Second}
	switch {
	case cfg.Repos.Token != "":
		tokens = github.StaticToken(cfg.Repos.Token)
	case cfg.Repos.AppID != "":
		pemBytes, err := os.ReadFile(cfg.Repos.AppKeyFile)
		if err != nil {
			return nil, fmt.Errorf("SANDBOT_GITHUB_APP_KEY_FILE: %w", err)
		}
		key, err := github.ParsePrivateKey(pemBytes)
		if err != nil {
			return nil, fmt.Errorf("SANDBOT_GITHUB_APP_KEY_FILE: %w", err)
		}
		tokens = github.AppTokens(cfg.Repos.APIURL, cfg.Repos.AppID, cfg.Repos.InstallationID, key, hc)
	}
	var values []string
	for _, s := range known {
		if len(s.Value) >= redact.MinLen {
			values = append(values, s.Value)
		}
	}
	a := &repo.Activities{
		Store: store,
		Config: repo.Config{
			Allow: cfg.Repos.Allow, GitURL: cfg.Repos.GitURL, Depth: cfg.Repos.CloneDepth,
			Submodules: cfg.Repos.Submodules, MaxBytes: int64(cfg.Repos.MaxBytes), Author: cfg.Repos.Author,
		},
		Tokens: tokens, Redactor: red, Known: values, Logger: log,
	}
	if tokens != nil {
		a.GitHub = &github.Client{BaseURL: cfg.Repos.APIURL, HTTP: hc, Tokens: tokens}
	}
	return a, nil
}
