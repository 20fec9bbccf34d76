// Package workflows owns the session workflow: one long-lived Temporal
// workflow per chat thread that keeps the conversation, runs the agent loop
// (model activity, approval policy, sandbox exec activities), holds pending
// approvals, and carries its state through continue-as-new for months.
//
// It implements the contract of package session (update, query and signal
// names and payloads). Code in this package must be deterministic; what it
// may change and how is the versioning policy in docs/ARCHITECTURE.md.
package workflows

import "github.com/sandbot/sandbot/session"

// Input is the session workflow's argument: what the bot sends to start a
// session (session.SessionInput, whose fields it embeds so the JSON shape is
// one flat object), plus the state a continue-as-new carries.
type Input struct {
	session.SessionInput
	// State is set only by continue-as-new.
	State *State `json:"state,omitempty"`
}
