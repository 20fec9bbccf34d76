package session

import "time"

// Roles used in the transcript. They match the chat-completions wire roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ShellToolName is the agent's shell tool (ShareFileToolName is the other).
const ShellToolName = "shell"

// Message is one transcript entry. It is deliberately the chat-completions
// shape so the model activity converts it one-to-one, and it is JSON-friendly
// so it lives in workflow state across continue-as-new.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	// User is the chat user who wrote a user message (display only; never
	// sent to the model as a separate field).
	User string `json:"user,omitempty"`
	// Images are images attached to a user message, sent to a vision
	// model as image parts (their bytes are in the snapshot store).
	Images []ImageRef `json:"images,omitempty"`
}

// ToolCall is a function call the model asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ShellArgs are the typed arguments of the shell tool.
type ShellArgs struct {
	Commands []string `json:"commands"`
	// TimeoutMs bounds each command; zero means the configured default.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// Timeout resolves the per-command timeout: the requested one, or def when
// none was given, capped at max (when max > 0).
func (a ShellArgs) Timeout(def, max time.Duration) time.Duration {
	d := def
	if a.TimeoutMs > 0 {
		d = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}
