package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/console"
)

// listSessions reads every console session and orders them as a tree:
// each fork right under the session it was forked from.
func (a *Adapter) listSessions(ctx context.Context) ([]sessionRow, error) {
	list, err := a.cfg.Sessions.List(ctx, chat.ListFilter{Platform: console.Platform, Channel: "local", ActiveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("tui: list sessions: %w", err)
	}
	var rows []sessionRow
	for _, s := range list {
		r := sessionRow{th: s.Location, created: s.StartedAt, lastActivity: s.StartedAt}
		if info, err := a.cfg.Sessions.Info(ctx, s.WorkflowID); err == nil {
			r.title, r.backend, r.turns, r.status, r.parent = info.Title, info.Backend, info.Turns, info.Status, info.Parent
			if !info.CreatedAt.IsZero() {
				r.created = info.CreatedAt
			}
		}
		if ts, err := a.cfg.Sessions.TurnState(ctx, s.WorkflowID); err == nil {
			if ts.EndedAt.After(r.lastActivity) {
				r.lastActivity = ts.EndedAt
			}
			if ts.StartedAt.After(r.lastActivity) {
				r.lastActivity = ts.StartedAt
			}
		}
		rows = append(rows, r)
	}
	return treeOrder(rows), nil
}

// treeOrder puts forks under their parents (depth-first, newest activity
// first among siblings); a fork whose parent is not listed is a root.
func treeOrder(rows []sessionRow) []sessionRow {
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.th.ID()] = true
	}
	kids := map[string][]sessionRow{}
	for _, r := range rows {
		p := r.parent
		if !ids[p] {
			p = ""
		}
		kids[p] = append(kids[p], r)
	}
	for _, k := range kids {
		slices.SortStableFunc(k, func(a, b sessionRow) int {
			if c := b.lastActivity.Compare(a.lastActivity); c != 0 {
				return c
			}
			return strings.Compare(a.th.Thread, b.th.Thread)
		})
	}
	var out []sessionRow
	seen := map[string]bool{}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, r := range kids[parent] {
			if seen[r.th.ID()] {
				continue
			}
			seen[r.th.ID()] = true
			r.depth = depth
			out = append(out, r)
			walk(r.th.ID(), depth+1)
		}
	}
	walk("", 0)
	return out
}
