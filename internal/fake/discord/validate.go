package fakediscord

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
)

// TextLen is the length Discord's limits are checked against. The fake
// counts UTF-16 code units, which is never less than the number of code
// points, so a payload the fake accepts fits either way of counting.
func TextLen(s string) int { return len(utf16.Encode([]rune(s))) }

// payload is the part of a message body that the fake stores and checks.
// Pointer fields distinguish "absent" (keep on edit) from "empty".
type payload struct {
	Content     *string          `json:"content"`
	Components  *json.RawMessage `json:"components"`
	Embeds      *json.RawMessage `json:"embeds"`
	Flags       *int             `json:"flags"`
	Attachments *json.RawMessage `json:"attachments"`
	// AllowedMentions says whom the content may ping; absent, Discord
	// pings every user mentioned.
	AllowedMentions *struct {
		Parse []string `json:"parse"`
		Users []string `json:"users"`
	} `json:"allowed_mentions"`
}

func decodePayload(raw json.RawMessage) (payload, error) {
	var p payload
	if len(raw) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("decode message payload: %w", err)
	}
	return p, nil
}

type component struct {
	Type        int         `json:"type"`
	CustomID    *string     `json:"custom_id"`
	Label       string      `json:"label"`
	Style       int         `json:"style"`
	URL         string      `json:"url"`
	Value       string      `json:"value"`
	Placeholder string      `json:"placeholder"`
	MinLength   int         `json:"min_length"`
	MaxLength   int         `json:"max_length"`
	Components  []component `json:"components"`
}

type embedField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type embed struct {
	Title       string       `json:"title"`
	URL         string       `json:"url"`
	Description string       `json:"description"`
	Fields      []embedField `json:"fields"`
	Footer      *struct {
		Text string `json:"text"`
	} `json:"footer"`
	Author *struct {
		Name string `json:"name"`
	} `json:"author"`
}

// checkMessage validates content, components and embeds against Discord's
// limits and collects errors in Discord's nested form-error shape.
func checkMessage(p payload, fe formErrors) {
	if p.Content != nil && TextLen(*p.Content) > MaxContent {
		fe.add([]string{"content"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxContent))
	}
	if p.Components != nil {
		checkComponents(*p.Components, fe)
	}
	if p.Embeds != nil {
		checkEmbeds(*p.Embeds, fe)
	}
}

func checkComponents(raw json.RawMessage, fe formErrors) {
	var rows []component
	if string(raw) == "null" {
		return
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		fe.add([]string{"components"}, "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType")
		return
	}
	if len(rows) > MaxRows {
		fe.add([]string{"components"}, "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 0 and %d in length.", MaxRows))
	}
	seen := map[string]bool{}
	for i, row := range rows {
		rp := []string{"components", strconv.Itoa(i)}
		if row.Type != 1 {
			fe.add(append(rp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
			continue
		}
		if len(row.Components) == 0 || len(row.Components) > MaxRowComponents {
			fe.add(append(rp, "components"), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxRowComponents))
		}
		for j, c := range row.Components {
			cp := append(append([]string{}, rp...), "components", strconv.Itoa(j))
			switch c.Type {
			case 2:
				checkButton(c, cp, seen, fe)
			case 3, 5, 6, 7, 8:
				if len(row.Components) != 1 {
					fe.add(cp, "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width")
				}
				checkCustomID(c.CustomID, cp, seen, fe)
			default:
				fe.add(append(cp, "type"), "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2, 3, 5, 6, 7, 8).")
			}
		}
	}
}

func checkButton(c component, path []string, seen map[string]bool, fe formErrors) {
	if TextLen(c.Label) > MaxButtonLabel {
		fe.add(append(path, "label"), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxButtonLabel))
	}
	switch c.Style {
	case 1, 2, 3, 4:
		checkCustomID(c.CustomID, path, seen, fe)
	case 5:
		if c.URL == "" {
			fe.add(append(path, "url"), "BASE_TYPE_REQUIRED", "This field is required")
		}
		if c.CustomID != nil && *c.CustomID != "" {
			fe.add(append(path, "custom_id"), "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED", "A custom id is not allowed on link buttons")
		}
	default:
		fe.add(append(path, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5}.")
	}
}

func checkCustomID(id *string, path []string, seen map[string]bool, fe formErrors) {
	p := append(path, "custom_id")
	switch {
	case id == nil || *id == "":
		fe.add(p, "BASE_TYPE_REQUIRED", "This field is required")
	case TextLen(*id) > MaxCustomID:
		fe.add(p, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxCustomID))
	case seen[*id]:
		fe.add(p, "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
	default:
		seen[*id] = true
	}
}

func checkEmbeds(raw json.RawMessage, fe formErrors) {
	var es []embed
	if string(raw) == "null" {
		return
	}
	if err := json.Unmarshal(raw, &es); err != nil {
		fe.add([]string{"embeds"}, "MODEL_TYPE_CONVERT", "Only iterables may be used in a ListType")
		return
	}
	if len(es) > MaxEmbeds {
		fe.add([]string{"embeds"}, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbeds))
	}
	total := 0
	for i, e := range es {
		p := []string{"embeds", strconv.Itoa(i)}
		max := func(field string, s string, n int) {
			total += TextLen(s)
			if TextLen(s) > n {
				fe.add(append(append([]string{}, p...), field), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", n))
			}
		}
		if e.URL != "" {
			// Discord takes only absolute http(s) URLs here.
			if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				fe.add(append(append([]string{}, p...), "url"), "URL_TYPE_INVALID_URL", "Not a well formed URL.")
			}
		}
		max("title", e.Title, MaxEmbedTitle)
		max("description", e.Description, MaxEmbedDescription)
		if e.Footer != nil {
			max("footer", e.Footer.Text, MaxEmbedFooter)
		}
		if e.Author != nil {
			max("author", e.Author.Name, MaxEmbedTitle)
		}
		if len(e.Fields) > MaxEmbedFields {
			fe.add(append(p, "fields"), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbedFields))
		}
		for j, f := range e.Fields {
			fp := append(append([]string{}, p...), "fields", strconv.Itoa(j))
			total += TextLen(f.Name) + TextLen(f.Value)
			if f.Name == "" || TextLen(f.Name) > MaxEmbedFieldName {
				fe.add(append(fp, "name"), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxEmbedFieldName))
			}
			if f.Value == "" || TextLen(f.Value) > MaxEmbedFieldValue {
				fe.add(append(fp, "value"), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxEmbedFieldValue))
			}
		}
	}
	if total > MaxEmbedTotal {
		fe.add([]string{"embeds"}, "MAX_EMBED_SIZE_EXCEEDED", fmt.Sprintf("Embed size exceeds maximum size of %d", MaxEmbedTotal))
	}
}

// isEmpty reports whether a new message would have nothing to show.
func isEmpty(p payload, files int) bool {
	if files > 0 {
		return false
	}
	if p.Content != nil && strings.TrimSpace(*p.Content) != "" {
		return false
	}
	if p.Embeds != nil && len(*p.Embeds) > 2 && string(*p.Embeds) != "null" {
		return false
	}
	if p.Components != nil && len(*p.Components) > 2 && string(*p.Components) != "null" {
		return false
	}
	return true
}

type modalData struct {
	CustomID   string      `json:"custom_id"`
	Title      string      `json:"title"`
	Components []component `json:"components"`
}

// checkModal validates a type 9 callback's data.
func checkModal(raw json.RawMessage, fe formErrors) {
	var m modalData
	if err := json.Unmarshal(raw, &m); err != nil {
		fe.add([]string{"data"}, "MODEL_TYPE_CONVERT", "Expected an object")
		return
	}
	id := m.CustomID
	checkCustomID(&id, []string{"data"}, map[string]bool{}, fe)
	if m.Title == "" || TextLen(m.Title) > MaxModalTitle {
		fe.add([]string{"data", "title"}, "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxModalTitle))
	}
	if len(m.Components) == 0 || len(m.Components) > MaxRows {
		fe.add([]string{"data", "components"}, "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxRows))
	}
	seen := map[string]bool{}
	for i, row := range m.Components {
		rp := []string{"data", "components", strconv.Itoa(i)}
		if row.Type != 1 || len(row.Components) != 1 || row.Components[0].Type != 4 {
			fe.add(rp, "MODAL_ROW_INVALID", "A modal row holds exactly one text input")
			continue
		}
		ti := row.Components[0]
		tp := append(rp, "components", "0")
		checkCustomID(ti.CustomID, tp, seen, fe)
		if ti.Label == "" || TextLen(ti.Label) > MaxTextInputLabel {
			fe.add(append(tp, "label"), "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", MaxTextInputLabel))
		}
		if ti.Style != 1 && ti.Style != 2 {
			fe.add(append(tp, "style"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2}.")
		}
		if ti.MaxLength < 0 || ti.MaxLength > 4000 || ti.MinLength < 0 || ti.MinLength > 4000 {
			fe.add(tp, "BASE_TYPE_BAD_LENGTH", "min_length and max_length must be between 0 and 4000")
		}
	}
}

var commandName = regexp.MustCompile(`^[-_\p{L}\p{N}]{1,32}$`)

type commandOption struct {
	Type        int    `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Choices     []struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	} `json:"choices"`
	Options []commandOption `json:"options"`
}

type command struct {
	Name        string          `json:"name"`
	Type        int             `json:"type"`
	Description string          `json:"description"`
	Options     []commandOption `json:"options"`
}

func checkName(name string, path []string, fe formErrors) {
	if !commandName.MatchString(name) || strings.ToLower(name) != name {
		fe.add(append(path, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
	}
}

func checkDescription(d string, path []string, fe formErrors) {
	if d == "" || TextLen(d) > 100 {
		fe.add(append(path, "description"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
}

// checkCommands validates a bulk-overwrite body the way Discord does for
// chat-input commands.
func checkCommands(cmds []command, fe formErrors) {
	if len(cmds) > 100 {
		fe.add(nil, "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
	}
	names := map[string]bool{}
	for i, c := range cmds {
		p := []string{strconv.Itoa(i)}
		checkName(c.Name, p, fe)
		if names[c.Name] {
			fe.add(append(p, "name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique")
		}
		names[c.Name] = true
		if c.Type == 0 || c.Type == 1 {
			checkDescription(c.Description, p, fe)
		}
		checkOptions(c.Options, p, fe)
	}
}

func checkOptions(opts []commandOption, p []string, fe formErrors) {
	if len(opts) > 25 {
		fe.add(append(p, "options"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
	}
	optional := false
	for j, o := range opts {
		op := append(append([]string{}, p...), "options", strconv.Itoa(j))
		checkName(o.Name, op, fe)
		checkDescription(o.Description, op, fe)
		if o.Required && optional {
			fe.add(op, "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options")
		}
		if !o.Required {
			optional = true
		}
		if len(o.Choices) > 25 {
			fe.add(append(op, "choices"), "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
		}
		for k, ch := range o.Choices {
			if ch.Name == "" || TextLen(ch.Name) > 100 {
				fe.add(append(op, "choices", strconv.Itoa(k), "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
			}
		}
		checkOptions(o.Options, op, fe)
	}
}
