package agent

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config is what the model activity needs. It is plain data: reading it from
// the environment is config/'s job.
//
// Any OpenAI-compatible chat-completions endpoint works; BaseURL is the API
// root that "/chat/completions" is appended to:
//
//   - OpenAI: https://api.openai.com/v1
//   - Azure OpenAI: https://<resource>.openai.azure.com/openai/v1 (the
//     OpenAI-compatible v1 API; the API key is sent as a Bearer token and
//     Model is the deployment name)
//   - Ollama: http://localhost:11434/v1 (APIKey may be empty)
//   - vLLM: http://<host>:8000/v1
//   - LiteLLM proxy: http://<host>:4000/v1 (APIKey is the proxy's key)
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1. Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>". Empty sends no
	// Authorization header (local servers). It never appears in errors.
	APIKey string
	// Model is the model (or Azure deployment) name. Required.
	Model string
	// Allowed are the other models a session may pick (/model); a request
	// naming any other is refused, whatever the workflow asked.
	Allowed []string
	// SystemPrompt is prepended to every request; empty means
	// DefaultSystemPrompt.
	SystemPrompt string
	// Stream uses server-sent events; the activity then heartbeats as
	// chunks arrive, so long generations are not mistaken for a hung worker.
	Stream bool
	// RequestTimeout bounds one model call (the whole stream when
	// streaming); zero means DefaultRequestTimeout. The workflow's activity
	// StartToClose timeout must be longer.
	RequestTimeout time.Duration
	// HTTPClient is used for requests; nil means a plain http.Client.
	HTTPClient *http.Client
	// Window is the model's context window; what a call sends is fitted
	// into it (see Fit). Zero fields take DefaultContextTokens and
	// DefaultAnswerTokens.
	Window Window
	// Vision sends images attached to user messages as image parts
	// (SANDBOT_MODEL_VISION); without it the model is told their paths.
	Vision bool
}

// DefaultRequestTimeout bounds a model call when Config.RequestTimeout is
// zero.
const DefaultRequestTimeout = 3 * time.Minute

// DefaultSystemPrompt tells the model how to work in the sandbox.
const DefaultSystemPrompt = `You are sandbot, a coding assistant working in a sandboxed workspace on behalf of the people in a chat thread.

How to work:
- Use the "shell" tool to inspect and change the workspace. It runs each command with /bin/sh -c in the workspace root, which is the current directory; prefer relative paths.
- Look before you answer: read the files and run the commands that settle the question. Never invent file names, file contents, command output or test results; if you did not see it, say so.
- Batch related commands into one shell call when that saves round trips, and pass timeout_ms for commands that may run long (builds, tests).
- Some commands need a human's approval before they run. If a call is rejected, do not retry it unchanged; adjust the plan or ask.
- Long outputs are shortened; narrow them yourself (head, tail, grep) when you need a specific part.

How to answer:
- Be concise. Lead with the result, then the evidence (the files you read, the commands you ran and what they showed).
- Use Markdown sparingly: short paragraphs, lists, and fenced code blocks for code and command output.`

// validate checks the config and returns a normalised copy.
func (c Config) validate() (Config, error) {
	var problems []string
	c.Model = strings.TrimSpace(c.Model)
	c.BaseURL = strings.TrimSpace(c.BaseURL)
	if c.Model == "" {
		problems = append(problems, "Model is required (the model name, e.g. gpt-4o-mini, or the Azure deployment name)")
	}
	if c.BaseURL == "" {
		problems = append(problems, "BaseURL is required (the API root, e.g. https://api.openai.com/v1 or http://localhost:11434/v1)")
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("BaseURL %q is not an http(s) URL (want e.g. https://api.openai.com/v1)", redactURL(c.BaseURL)))
	}
	if c.RequestTimeout < 0 {
		problems = append(problems, fmt.Sprintf("RequestTimeout must not be negative (got %s)", c.RequestTimeout))
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("agent: config: %s", strings.Join(problems, "; "))
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if strings.TrimSpace(c.SystemPrompt) == "" {
		c.SystemPrompt = DefaultSystemPrompt
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return c, nil
}

// redactURL drops credentials and the query (which may carry keys) from a
// URL before it is shown anywhere.
// RedactURL drops credentials, query and fragment from an endpoint URL so
// it can be printed or logged.
func RedactURL(raw string) string { return redactURL(raw) }

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}
