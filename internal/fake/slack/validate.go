package fakeslack

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
)

// Block Kit limits the fake enforces, as Slack documents and enforces them.
const (
	MaxMessageBlocks   = 50
	MaxModalBlocks     = 100
	MaxSectionText     = 3000
	MaxSectionFields   = 10
	MaxFieldText       = 2000
	MaxHeaderText      = 150
	MaxContextElements = 10
	MaxActionsElements = 25
	MaxButtonText      = 75
	MaxButtonValue     = 2000
	MaxActionID        = 255
	MaxBlockID         = 255
	MaxMarkdownBlock   = 12000
)

// TextLen measures text the way the limits are applied: in UTF-16 code
// units, which is never less than the number of characters Slack counts.
func TextLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

type jsonObj = map[string]any

func str(o jsonObj, k string) string {
	v, _ := o[k].(string)
	return v
}

func obj(o jsonObj, k string) jsonObj {
	v, _ := o[k].(map[string]any)
	return v
}

func arr(o jsonObj, k string) []any {
	v, _ := o[k].([]any)
	return v
}

// ValidateBlocks checks a message's blocks (the JSON array sent as the
// `blocks` form field) and returns Slack-style error strings, one per
// problem; nil means valid.
func ValidateBlocks(raw []byte) []string {
	blocks, errs := decodeBlocks(raw)
	if errs != nil {
		return errs
	}
	if len(blocks) > MaxMessageBlocks {
		errs = append(errs, fmt.Sprintf("must contain at most %d blocks, got %d [json-pointer:/blocks]", MaxMessageBlocks, len(blocks)))
	}
	return append(errs, checkBlocks(blocks, false)...)
}

func decodeBlocks(raw []byte) ([]jsonObj, []string) {
	var blocks []jsonObj
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, []string{"blocks must be a JSON array of objects: " + err.Error()}
	}
	return blocks, nil
}

// validateViewBlocks checks a modal's blocks and returns its input blocks.
func validateViewBlocks(raw json.RawMessage) ([]viewInput, []string) {
	if len(raw) == 0 {
		return nil, []string{"view must have blocks"}
	}
	blocks, errs := decodeBlocks(raw)
	if errs != nil {
		return nil, errs
	}
	if len(blocks) > MaxModalBlocks {
		errs = append(errs, fmt.Sprintf("must contain at most %d blocks [json-pointer:/view/blocks]", MaxModalBlocks))
	}
	errs = append(errs, checkBlocks(blocks, true)...)
	var inputs []viewInput
	for _, b := range blocks {
		if str(b, "type") == "input" {
			el := obj(b, "element")
			inputs = append(inputs, viewInput{BlockID: str(b, "block_id"), ActionID: str(el, "action_id"), Type: str(el, "type")})
		}
	}
	return inputs, errs
}

func checkBlocks(blocks []jsonObj, modal bool) []string {
	var errs []string
	seen := map[string]bool{}
	for i, b := range blocks {
		at := fmt.Sprintf("[json-pointer:/blocks/%d", i)
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Sprintf(format, a...)+" "+at+"]")
		}
		if id := str(b, "block_id"); id != "" {
			if TextLen(id) > MaxBlockID {
				fail("block_id must be at most %d characters", MaxBlockID)
			}
			if seen[id] {
				fail("block_id %q is not unique", id)
			}
			seen[id] = true
		}
		switch t := str(b, "type"); t {
		case "section":
			text, fields := obj(b, "text"), arr(b, "fields")
			if text == nil && len(fields) == 0 {
				fail("section must have text or fields")
			}
			if text != nil {
				if e := checkText(text, MaxSectionText, true); e != "" {
					fail("section text %s", e)
				}
			}
			if len(fields) > MaxSectionFields {
				fail("section must have at most %d fields", MaxSectionFields)
			}
			for _, f := range fields {
				fo, _ := f.(map[string]any)
				if e := checkText(fo, MaxFieldText, true); e != "" {
					fail("section field %s", e)
				}
			}
		case "header":
			if e := checkText(obj(b, "text"), MaxHeaderText, false); e != "" {
				fail("header text %s", e)
			}
		case "divider":
		case "context":
			els := arr(b, "elements")
			if len(els) == 0 || len(els) > MaxContextElements {
				fail("context must have 1-%d elements", MaxContextElements)
			}
			for _, e := range els {
				eo, _ := e.(map[string]any)
				if str(eo, "type") == "image" {
					continue
				}
				if msg := checkText(eo, MaxSectionText, true); msg != "" {
					fail("context element %s", msg)
				}
			}
		case "actions":
			errs = append(errs, checkActions(b, at)...)
		case "markdown":
			if s := str(b, "text"); s == "" || TextLen(s) > MaxMarkdownBlock {
				fail("markdown text must be 1-%d characters", MaxMarkdownBlock)
			}
		case "rich_text", "image":
		case "input":
			if !modal {
				fail("input blocks are only allowed in modals")
			}
			if e := checkText(obj(b, "label"), 2000, false); e != "" {
				fail("input label %s", e)
			}
			el := obj(b, "element")
			if el == nil || str(el, "type") == "" {
				fail("input must have an element")
			}
			if ml, ok := el["max_length"].(float64); ok && (ml < 1 || ml > 3000) {
				fail("plain_text_input max_length must be 1-3000")
			}
		default:
			fail("unknown block type %q", t)
		}
	}
	return errs
}

func checkActions(b jsonObj, at string) []string {
	var errs []string
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Sprintf(format, a...)+" "+at+"]")
	}
	els := arr(b, "elements")
	if len(els) == 0 || len(els) > MaxActionsElements {
		fail("actions must have 1-%d elements", MaxActionsElements)
	}
	ids := map[string]bool{}
	for j, e := range els {
		eo, _ := e.(map[string]any)
		if t := str(eo, "type"); t != "button" {
			fail("element %d: only buttons are expected here, got %q", j, t)
			continue
		}
		id := str(eo, "action_id")
		if id != "" {
			if TextLen(id) > MaxActionID {
				fail("element %d: action_id must be at most %d characters", j, MaxActionID)
			}
			if ids[id] {
				fail("element %d: action_id %q is not unique in its block", j, id)
			}
			ids[id] = true
		}
		if e := checkText(obj(eo, "text"), MaxButtonText, false); e != "" {
			fail("element %d: button text %s", j, e)
		}
		if TextLen(str(eo, "value")) > MaxButtonValue {
			fail("element %d: button value must be at most %d characters", j, MaxButtonValue)
		}
		if st := str(eo, "style"); st != "" && st != "primary" && st != "danger" {
			fail("element %d: style must be primary or danger", j)
		}
	}
	return errs
}

// checkText validates a text object; mrkdwn says whether mrkdwn is allowed.
func checkText(t jsonObj, max int, mrkdwn bool) string {
	if t == nil {
		return "is missing"
	}
	switch str(t, "type") {
	case "plain_text":
	case "mrkdwn":
		if !mrkdwn {
			return "must be plain_text"
		}
	default:
		return fmt.Sprintf("has unknown type %q", str(t, "type"))
	}
	s := str(t, "text")
	if s == "" {
		return "must not be empty"
	}
	if n := TextLen(s); n > max {
		return fmt.Sprintf("must be at most %d characters, got %d", max, n)
	}
	return ""
}
