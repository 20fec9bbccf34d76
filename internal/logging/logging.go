// Package logging sets up log/slog for sandbot's binaries and bridges it
// into the Temporal SDK, so every line is structured and leveled the same
// way.
package logging

import (
	"io"
	"log/slog"

	tlog "go.temporal.io/sdk/log"
)

// New returns a text logger at the named level (debug, info, warn, error).
func New(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	switch level {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// Temporal adapts a slog logger for the Temporal client. The SDK is chatty
// at info level, so its lines are passed at the logger's own level.
func Temporal(l *slog.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(l)
}
