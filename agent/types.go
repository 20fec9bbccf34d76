// Package agent owns the coding agent's side of a session: the model activity
// (any OpenAI-compatible chat-completions endpoint, through go-openai), the
// tool schemas the model sees, the approval policy, and the transcript types
// and budgets the session workflow keeps.
//
// Everything the workflow calls directly (Policy, ParseShellArgs, CapToolResult,
// Transcript budgeting) is pure and deterministic, so it is safe inside
// workflow code. Only Activities talks to the network.
package agent

// Roles used in the transcript. They match the chat-completions wire roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ShellToolName is the only tool the agent has.
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
}

// ToolCall is a function call the model asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ModelRequest is the input of Activities.Complete.
type ModelRequest struct {
	// Messages is the transcript to send, without the system prompt (the
	// activity adds it, so a prompt change needs no workflow change).
	Messages []Message `json:"messages"`
	// DisableTools asks for a plain answer (used when the per-turn tool
	// call cap is reached).
	DisableTools bool `json:"disable_tools,omitempty"`
}

// ModelResponse is the output of Activities.Complete.
type ModelResponse struct {
	Content      string     `json:"content,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	Usage        Usage      `json:"usage"`
}

// Usage is the token accounting the endpoint reported.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// ShellArgs are the typed arguments of the shell tool.
type ShellArgs struct {
	Commands []string `json:"commands"`
	// TimeoutMs bounds each command; zero means the configured default.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}
