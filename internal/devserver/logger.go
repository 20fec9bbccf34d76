package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger bridges the server's logger interface to slog. Only warnings and errors pass:
// below that the server logs every shard movement and membership change.
//
// After close it drops everything, so goroutines the server leaves winding down after Stop
// cannot write to a logger the caller has already discarded (a test's logger panics then).
type serverLogger struct {
	l      *slog.Logger
	closed *atomic.Bool
	tags   []tag.Tag // from With; converted only when something is logged
}

var (
	_ log.Logger     = (*serverLogger)(nil)
	_ log.WithLogger = (*serverLogger)(nil)
)

// fatalError is what Fatal panics with, so Start can turn a fatal start-up failure into an
// error (see Server.startServer).
type fatalError struct{ msg string }

func (e fatalError) Error() string { return "fatal: " + e.msg }

func newServerLogger(l *slog.Logger) *serverLogger {
	return &serverLogger{l: l, closed: new(atomic.Bool)}
}

func (s *serverLogger) close() { s.closed.Store(true) }

func (s *serverLogger) Debug(string, ...tag.Tag) {}
func (s *serverLogger) Info(string, ...tag.Tag)  {}

func (s *serverLogger) Warn(msg string, tags ...tag.Tag) { s.log(slog.LevelWarn, msg, tags) }

func (s *serverLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// DPanic logs like Error: it panics only in the server's development mode.
func (s *serverLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s *serverLogger) Panic(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(msg)
}

// Fatal must not return. Panicking rather than exiting lets Start recover fatal start-up
// failures into an error; a fatal error in a background goroutine still ends the process, with
// a stack trace.
func (s *serverLogger) Fatal(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(fatalError{msg: msg + tagSummary(tags)})
}

func (s *serverLogger) With(tags ...tag.Tag) log.Logger {
	return &serverLogger{l: s.l, closed: s.closed, tags: append(s.tags[:len(s.tags):len(s.tags)], tags...)}
}

func (s *serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	if s.closed.Load() || !s.l.Enabled(context.Background(), level) {
		return
	}
	args := make([]any, 0, len(s.tags)+len(tags))
	for _, t := range append(s.tags[:len(s.tags):len(s.tags)], tags...) {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	s.l.Log(context.Background(), level, msg, args...)
}

func tagSummary(tags []tag.Tag) string {
	var s string
	for _, t := range tags {
		s += fmt.Sprintf(" %s=%v", t.Key(), t.Value())
	}
	return s
}

// minLevelHandler drops records below min before they reach h.
type minLevelHandler struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevelHandler) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{h: m.h.WithAttrs(as), min: m.min}
}

func (m minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{h: m.h.WithGroup(name), min: m.min}
}
