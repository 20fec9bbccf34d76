package fakeslack

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Call is one Web API request as the fake saw it and answered it.
type Call struct {
	Seq    int
	Method string
	// Form holds form or query values, without the token.
	Form url.Values
	// Body is the request body of JSON methods (views.open).
	Body json.RawMessage
	// RawBlocks is the `blocks` field as sent; Blocks is it decoded with
	// slack-go's own types.
	RawBlocks string
	Blocks    slack.Blocks
	// Status is the HTTP status answered; Error the Slack error code ("" for
	// ok:true).
	Status int
	Error  string
	// Response is the JSON body answered.
	Response json.RawMessage
	At       time.Time
}

// OK reports whether Slack answered 200 with ok:true.
func (c Call) OK() bool { return c.Status == 200 && c.Error == "" }

// Text returns the `text` form value.
func (c Call) Text() string { return c.Form.Get("text") }

// Ack is a Socket Mode acknowledgement received from the client.
type Ack struct {
	EnvelopeID string
	// Payload is the optional response payload of the ack (slash commands,
	// view submissions).
	Payload json.RawMessage
	At      time.Time
	// Latency is the time from sending the envelope to receiving its ack.
	Latency time.Duration
}

// Envelope is a Socket Mode envelope pushed to the client.
type Envelope struct {
	ID      string
	Type    string // events_api, interactive, slash_commands
	Payload json.RawMessage
	Retry   int
	At      time.Time
	// Conn is the websocket it went out on (1-based, in accept order).
	Conn int
	// Unacked says the fake sent it again because an earlier delivery was
	// never acknowledged (Options.RedeliverUnacked).
	Unacked bool
}

// Hook is a post to a response_url.
type Hook struct {
	ID   string // the response_url's ID
	Body json.RawMessage
	At   time.Time
}

// Text returns the hook body's text field.
func (h Hook) Text() string {
	var v struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(h.Body, &v)
	return v.Text
}

// Violation is a chat.update (or chat.delete) call that broke the
// configured budget.
type Violation struct {
	// Kind is "per_minute" (workspace budget) or "per_message" (interval).
	Kind    string
	Channel string
	TS      string
	At      time.Time
	Detail  string
}

// Message is a message as a channel shows it.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // "" for a top-level message without replies
	User     string
	BotID    string
	SubType  string
	Text     string
	// RawBlocks is the JSON array of blocks ("" when none).
	RawBlocks string
	Files     []string
	// Updates counts chat.update calls applied to the message.
	Updates int
	Updated time.Time
	// Posted is when it was posted; Deleted when chat.delete took it out
	// of the channel (zero: it is there; see Snapshot.Deleted).
	Posted, Deleted time.Time
	// Reactions are the emoji names the bot reacted with
	// (reactions.add, reactions.remove), in order.
	Reactions []string
}

// Blocks decodes the message's blocks with slack-go's types.
func (m Message) Blocks() slack.Blocks {
	var b slack.Blocks
	if m.RawBlocks != "" {
		_ = json.Unmarshal([]byte(m.RawBlocks), &b)
	}
	return b
}

// ReaderText is the message's text as a reader sees it: its blocks' text
// (sections, fields, context and button labels), or its plain text when it
// has no blocks.
func (m Message) ReaderText() string {
	var blocks []map[string]any
	if m.RawBlocks == "" || json.Unmarshal([]byte(m.RawBlocks), &blocks) != nil {
		return m.Text
	}
	var out []string
	var walk func(o map[string]any)
	walk = func(o map[string]any) {
		switch t := o["text"].(type) {
		case string:
			out = append(out, t)
		case map[string]any:
			walk(t)
		}
		for _, k := range []string{"fields", "elements"} {
			if list, ok := o[k].([]any); ok {
				for _, x := range list {
					if m, ok := x.(map[string]any); ok {
						walk(m)
					}
				}
			}
		}
	}
	for _, b := range blocks {
		walk(b)
	}
	return strings.Join(out, "\n")
}

// Button is a button found in a message's blocks.
type Button struct {
	BlockID  string
	ActionID string
	Value    string
	Text     string
	Style    string
}

// Buttons lists the message's buttons in order.
func (m Message) Buttons() []Button {
	var raw []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
			// Text is an object on buttons but a plain string on context
			// elements, so it is decoded per type below.
			Text json.RawMessage `json:"text"`
		} `json:"elements"`
	}
	if m.RawBlocks == "" || json.Unmarshal([]byte(m.RawBlocks), &raw) != nil {
		return nil
	}
	var out []Button
	for _, b := range raw {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				var label struct {
					Text string `json:"text"`
				}
				_ = json.Unmarshal(e.Text, &label)
				out = append(out, Button{BlockID: b.BlockID, ActionID: e.ActionID, Value: e.Value, Text: label.Text, Style: e.Style})
			}
		}
	}
	return out
}

// File is an uploaded file (files upload v2).
type File struct {
	ID       string
	Name     string
	Title    string
	Length   int // declared in files.getUploadURLExternal
	Content  []byte
	Uploaded bool
	// Channel and ThreadTS are where files.completeUploadExternal shared it.
	Channel  string
	ThreadTS string
	Comment  string
	Shared   bool
	// User and MimeType are set for files users attached to messages
	// (UserMessage.Files), which url_private_download serves.
	User     string
	MimeType string
}

// View is a modal opened with views.open or views.push, as views.update
// last left it.
type View struct {
	ID              string
	TriggerID       string
	CallbackID      string
	PrivateMetadata string
	Raw             json.RawMessage
	// User is who clicked to get the trigger.
	User string
	// Previous is the view this one was pushed onto (views.push), and
	// Updates how often views.update replaced it.
	Previous string
	Updates  int
}

type openedView struct {
	View
	inputs []viewInput // input blocks: where submitted values go
}

type viewInput struct {
	BlockID, ActionID, Type string
}

// Fault is an injected failure for a Web API method.
type Fault struct {
	// Status is the HTTP status (429, 500, …); 0 means 200.
	Status int
	// RetryAfter is the Retry-After header in seconds (with Status 429).
	RetryAfter int
	// Error is the Slack error code answered with ok:false.
	Error string
}
