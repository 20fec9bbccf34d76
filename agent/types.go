// Package agent owns the coding agent's side of a session: the model activity
// (any OpenAI-compatible chat-completions endpoint, through go-openai), the
// tool schemas the model sees, the approval policy, and the transcript types
// and budgets the session workflow keeps.
//
// Everything the workflow calls directly (Policy, ParseShellArgs, CapToolResult,
// Transcript budgeting) is pure and deterministic, so it is safe inside
// workflow code. Only Activities talks to the network.
package agent

import "github.com/sandbot/sandbot/session"

// ModelRequest is the input of Activities.Complete.
type ModelRequest struct {
	// Messages is the transcript to send, without the system prompt (the
	// activity adds it, so a prompt change needs no workflow change).
	Messages []session.Message `json:"messages"`
	// DisableTools asks for a plain answer (used when the per-turn tool
	// call cap is reached).
	DisableTools bool `json:"disable_tools,omitempty"`
	// Model is the session's choice (/model); "" is the worker's model.
	Model string `json:"model,omitempty"`

	// Stored asks the activity to keep the transcript (see
	// transcripts.go): the transcript is Base's messages from Skip on
	// (none without a Base) followed by Messages; the activity stores it
	// for SessionID, answers with its ref, and fits what it sends into
	// ContextBytes itself. Without Stored, Messages is sent as it is.
	Stored       bool           `json:"stored,omitempty"`
	SessionID    string         `json:"session_id,omitempty"`
	Base         *TranscriptRef `json:"base,omitempty"`
	Skip         int            `json:"skip,omitempty"`
	ContextBytes int            `json:"context_bytes,omitempty"`
	// Compactable asks a Stored request that would have to leave whole
	// exchanges out to fit the window to fail with
	// ErrTypeNeedsCompaction instead, so the workflow compacts first.
	Compactable bool `json:"compactable,omitempty"`
}

// ModelResponse is the output of Activities.Complete.
type ModelResponse struct {
	Content      string             `json:"content,omitempty"`
	ToolCalls    []session.ToolCall `json:"tool_calls,omitempty"`
	FinishReason string             `json:"finish_reason,omitempty"`
	Usage        Usage              `json:"usage"`
	// Transcript is the stored transcript of a Stored request. Skipped is
	// how many leading messages of the request's Base it leaves out (the
	// ones the request skipped, when it was written whole).
	Transcript *TranscriptRef `json:"transcript,omitempty"`
	Skipped    int            `json:"skipped,omitempty"`
	// Dropped counts the messages of a Stored request's transcript that
	// had to be left out whole to fit the context window: the
	// conversation is due for compaction.
	Dropped int `json:"dropped,omitempty"`
}

// Usage is the token accounting the endpoint reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}
