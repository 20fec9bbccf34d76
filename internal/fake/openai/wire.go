package fakeopenai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// The wire types below are written independently of any client library, so
// the fake checks what a client really puts on the wire instead of echoing a
// library's own structs back at it.

// ChatRequest is the decoded body of POST /v1/chat/completions.
type ChatRequest struct {
	Model         string          `json:"model"`
	Messages      []ChatMessage   `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	MaxTokens     int             `json:"max_tokens,omitempty"`
	// MaxCompletionTokens is the newer spelling of MaxTokens.
	MaxCompletionTokens int      `json:"max_completion_tokens,omitempty"`
	Temperature         *float64 `json:"temperature,omitempty"`
	User                string   `json:"user,omitempty"`
}

// StreamOptions is the stream_options request field.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one request message. Content accepts both wire forms: a
// plain string (or null) and an array of content parts, whose text parts are
// joined.
type ChatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []WireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// Images are the message's image_url parts, in order, with data: URLs
	// decoded (as a vision model reads them).
	Images []ImagePart `json:"-"`
}

// ImagePart is an image_url content part.
type ImagePart struct {
	URL    string
	Detail string
	// MimeType and Data are a data: URL's type and decoded bytes.
	MimeType string
	Data     []byte
}

// UnmarshalJSON accepts string, null and content-part-array content.
func (m *ChatMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  []WireToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = ChatMessage{Role: raw.Role, Name: raw.Name, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID}
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		var sb strings.Builder
		for i, p := range parts {
			switch p.Type {
			case "text":
				sb.WriteString(p.Text)
			case "image_url":
				img, err := imagePart(p.ImageURL)
				if err != nil {
					return fmt.Errorf("content part %d: %w", i, err)
				}
				if m.Role != "user" {
					return fmt.Errorf("content part %d: image_url parts are only allowed in user messages", i)
				}
				m.Images = append(m.Images, img)
			default:
				return fmt.Errorf("content part %d: unknown type %q", i, p.Type)
			}
		}
		m.Content = sb.String()
	default:
		return fmt.Errorf("content must be a string, null or an array of parts, got %s", c)
	}
	return nil
}

// Tool is one entry of the request's tools array.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a function tool's definition. Parameters is kept raw so
// tests can decode and compare the schema exactly as sent.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// WireToolCall is a tool call as it appears in messages and responses.
type WireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function WireFunction `json:"function"`
}

// WireFunction is the function part of a tool call.
type WireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Response shapes (see wire-notes §3). Pointers and explicit nulls mirror
// what the real service sends, because clients must cope with them.

type completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
}

type choice struct {
	Index        int              `json:"index"`
	Message      responseMessage  `json:"message"`
	FinishReason string           `json:"finish_reason"`
	Logprobs     *json.RawMessage `json:"logprobs"`
}

type responseMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []WireToolCall `json:"tool_calls,omitempty"`
}

type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []WireToolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// imagePart checks an image_url part as OpenAI does: a URL is required,
// and a data: URL must be base64 of an image type.
func imagePart(u *struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}) (ImagePart, error) {
	if u == nil || u.URL == "" {
		return ImagePart{}, fmt.Errorf("image_url.url is required")
	}
	switch u.Detail {
	case "", "auto", "low", "high":
	default:
		return ImagePart{}, fmt.Errorf("image_url.detail %q is not auto, low or high", u.Detail)
	}
	img := ImagePart{URL: u.URL, Detail: u.Detail}
	rest, ok := strings.CutPrefix(u.URL, "data:")
	if !ok {
		return img, nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	mt, isB64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isB64 || !strings.HasPrefix(mt, "image/") {
		return ImagePart{}, fmt.Errorf("invalid image data URL: want data:image/<type>;base64,<data>")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return ImagePart{}, fmt.Errorf("invalid image data URL: %w", err)
	}
	img.MimeType, img.Data = mt, b
	return img, nil
}
