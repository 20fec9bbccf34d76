package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a slog.Handler that scrubs r's secrets from every record
// before h sees it: the message, string values, errors and Stringers
// (logged as their scrubbed text), in attributes and groups alike. The
// worker logs what commands and backends say (file names, daemon answers,
// model errors), and its log is read by people and shipped to systems that
// must not learn its secrets either. A nil or empty r returns h.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil || r.repl == nil {
		return h
	}
	return handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (x handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, x.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x handler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = x.attr(a)
	}
	return handler{h: x.h.WithAttrs(scrubbed), r: x.r}
}

func (x handler) WithGroup(name string) slog.Handler {
	return handler{h: x.h.WithGroup(name), r: x.r}
}

func (x handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		scrubbed := make([]any, len(g))
		for i, m := range g {
			scrubbed[i] = x.attr(m)
		}
		return slog.Group(a.Key, scrubbed...)
	case slog.KindAny:
		switch t := v.Any().(type) {
		case error:
			return slog.String(a.Key, x.r.Redact(t.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, x.r.Redact(t.String()))
		case []byte:
			return slog.String(a.Key, x.r.Redact(string(t)))
		default:
			// Structs, maps and slices: their printed form is what a text
			// or JSON handler would show.
			s := fmt.Sprintf("%+v", t)
			if red := x.r.Redact(s); red != s {
				return slog.String(a.Key, red)
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
