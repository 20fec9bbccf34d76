package slack

import (
	"fmt"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// Block Kit limits ToBlocks respects.
const (
	maxBlocks          = 50
	maxSectionText     = 3000
	maxSectionFields   = 10
	maxFieldText       = 2000
	maxContextText     = 3000
	maxActionsElements = 25
	maxButtonText      = 75
	// MaxButtonValue is the longest button value Slack accepts; approval
	// values longer than this cannot be shown (chat.Budget.MaxButtonValue).
	MaxButtonValue = 2000
	maxActionID    = 255
	maxTitle       = 300
	maxFallback    = 500
)

// actionIDSep separates a button's chat action ID from the suffix that
// makes it unique in its block; ActionIDOf strips it again.
const actionIDSep = "#"

// ToBlocks converts a neutral card into Block Kit blocks that Slack accepts,
// and the fallback text for notifications. Limits are enforced here, so
// any card can be posted:
//
//   - the title is a bold section; Text blocks are converted with Mrkdwn
//     and split into sections of at most 3,000 characters without breaking
//     code blocks; Code blocks keep their last lines when too long;
//   - Fields go ten to a section, each at most 2,000 characters;
//   - buttons go 25 to an actions block; their action_id is the chat action
//     ID, suffixed with "#n" when the same ID appears twice in a block;
//     labels are cut to 75 characters; a button whose value exceeds 2,000
//     characters is left out and a note says so;
//   - beyond 50 blocks the oldest content blocks are dropped (the title and
//     every actions block stay) and a context line says how many.
func ToBlocks(c chat.Card) ([]slackgo.Block, string) {
	var bs []slackgo.Block
	keep := map[int]bool{} // indexes that must survive trimming
	if t := strings.TrimSpace(c.Title); t != "" {
		keep[len(bs)] = true
		bs = append(bs, section("*"+inline(cutRunes(oneLine(t), maxTitle), true)+"*"))
	}
	actions := 0
	for _, b := range c.Blocks {
		switch b.Kind {
		case chat.BlockText:
			for _, s := range chunk(Mrkdwn(b.Text), maxSectionText) {
				bs = append(bs, section(s))
			}
		case chat.BlockCode:
			if b.Keep {
				// A command awaiting approval: split over sections, never cut.
				keep[len(bs)] = true
				for _, part := range codeSections(b.Text, maxSectionText) {
					bs = append(bs, section(part))
				}
				continue
			}
			bs = append(bs, section(codeBlock(b.Text, maxSectionText)))
		case chat.BlockFields:
			for i := 0; i < len(b.Fields); i += maxSectionFields {
				group := b.Fields[i:min(len(b.Fields), i+maxSectionFields)]
				fields := make([]*slackgo.TextBlockObject, len(group))
				for j, f := range group {
					fields[j] = mrkdwn(fieldText(f))
				}
				bs = append(bs, slackgo.NewSectionBlock(nil, fields, nil))
			}
		case chat.BlockDivider:
			bs = append(bs, slackgo.NewDividerBlock())
		case chat.BlockContext:
			if s := truncateMrkdwn(Mrkdwn(b.Text), maxContextText); strings.TrimSpace(s) != "" {
				bs = append(bs, slackgo.NewContextBlock("", mrkdwn(s)))
			}
		case chat.BlockActions:
			blocks, dropped := actionBlocks(b.Buttons, &actions)
			for _, ab := range blocks {
				keep[len(bs)] = true
				bs = append(bs, ab)
			}
			if dropped > 0 {
				bs = append(bs, slackgo.NewContextBlock("", mrkdwn(fmt.Sprintf("_%d button(s) could not be shown: their data is too large for Slack._", dropped))))
			}
		default:
			// An unknown kind from a newer core: show its text rather than lose it.
			if strings.TrimSpace(b.Text) != "" {
				for _, s := range chunk(Mrkdwn(b.Text), maxSectionText) {
					bs = append(bs, section(s))
				}
			}
		}
	}
	if len(bs) == 0 {
		bs = append(bs, section("_(empty)_"))
	}
	bs = trimBlocks(bs, keep)
	if c.Key != "" {
		// Where FindCards reads it back (unseen, kept by chat.update).
		switch b := bs[0].(type) {
		case *slackgo.SectionBlock:
			b.BlockID = cardBlockID(c.Key)
		case *slackgo.ContextBlock:
			b.BlockID = cardBlockID(c.Key)
		}
	}
	return bs, fallback(c)
}

// cardBlockID is the block_id of a keyed card's first block (Slack allows
// 255 characters; a key is a few dozen).
func cardBlockID(key string) string { return cardBlockPrefix + key }

const cardBlockPrefix = "sandbot-card:"

// cardKey is the Card.Key a message's blocks carry, if any.
func cardKey(bs slackgo.Blocks) string {
	if len(bs.BlockSet) == 0 {
		return ""
	}
	id, ok := strings.CutPrefix(bs.BlockSet[0].ID(), cardBlockPrefix)
	if !ok {
		return ""
	}
	return id
}

func section(text string) *slackgo.SectionBlock {
	return slackgo.NewSectionBlock(mrkdwn(text), nil, nil)
}

func mrkdwn(text string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, text, false, false)
}

func plain(text string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, text, true, false)
}

// CodeLen is the length of text inside a code block as ToBlocks writes
// it (controls escaped, &, < and > as entities, fences broken), in the
// units of Slack's limits. The core uses it to decide whether a command
// awaiting approval fits a section whole.
func CodeLen(text string) int {
	lines := strings.Split(safetext.Text(text), "\n")
	n := len(lines) - 1
	for _, l := range lines {
		n += TextLen(codeLine(l))
	}
	return n
}

// codeBlock renders preformatted text within max characters, keeping the
// end (the latest output matters most) behind a "…" line when cut. Text
// is neutralised first (chat/internal/safetext), so no control or bidi
// character reaches Slack.
func codeBlock(text string, max int) string {
	text = strings.TrimRight(safetext.Text(text), "\n")
	if strings.TrimSpace(text) == "" {
		return "_(no output)_"
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = codeLine(l)
	}
	budget := max - len(fenceOpen) - len(fenceClose)
	body := strings.Join(lines, "\n")
	if TextLen(body) <= budget {
		return fenceOpen + body + fenceClose
	}
	const more = "…\n"
	budget -= len(more)
	var kept []string
	used := 0
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		n := TextLen(l) + 1
		if used+n > budget {
			if len(kept) == 0 { // one huge line: keep its tail
				kept = append(kept, tailRunes(l, budget-1))
			}
			break
		}
		kept = append(kept, l)
		used += n
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return fenceOpen + more + strings.Join(kept, "\n") + fenceClose
}

// codeSections renders text as code blocks of at most max characters
// each, splitting between lines (or inside one very long line), so that
// all of it is shown.
func codeSections(text string, max int) []string {
	text = strings.TrimRight(safetext.Text(text), "\n")
	budget := max - len(fenceOpen) - len(fenceClose)
	var out, cur []string
	used := 0
	emit := func() {
		if len(cur) > 0 {
			out = append(out, fenceOpen+strings.Join(cur, "\n")+fenceClose)
		}
		cur, used = nil, 0
	}
	for _, l := range strings.Split(text, "\n") {
		l = codeLine(l)
		for TextLen(l) > budget {
			emit()
			head := measure.Prefix(l, budget)
			if head == "" {
				break
			}
			out = append(out, fenceOpen+head+fenceClose)
			l = l[len(head):]
		}
		if used > 0 && used+1+TextLen(l) > budget {
			emit()
		}
		if used > 0 {
			used++
		}
		cur = append(cur, l)
		used += TextLen(l)
	}
	emit()
	return out
}

// tailRunes returns the end of s that fits n (TextLen), not starting
// inside an &entity;.
func tailRunes(s string, n int) string {
	r := []rune(s)
	used, i := 0, len(r)
	for i > 0 && used+TextLen(string(r[i-1])) <= n {
		used += TextLen(string(r[i-1]))
		i--
	}
	out := string(r[i:])
	if semi := strings.IndexByte(out, ';'); semi >= 0 && semi < 6 && !strings.Contains(out[:semi], "&") {
		out = out[semi+1:]
	}
	return out
}

func fieldText(f chat.Field) string {
	label := strings.TrimSpace(f.Label)
	value := Mrkdwn(strings.TrimSpace(f.Value))
	if strings.TrimSpace(value) == "" {
		value = "—"
	}
	if label == "" {
		return truncateMrkdwn(value, maxFieldText)
	}
	head := "*" + escape(cutRunes(oneLine(label), 100)) + "*\n"
	return head + truncateMrkdwn(value, maxFieldText-TextLen(head))
}

// truncateMrkdwn cuts mrkdwn to max characters, ending with "…", without
// unbalancing code fences.
func truncateMrkdwn(s string, max int) string {
	if TextLen(s) <= max {
		return s
	}
	parts := chunk(s, max-1)
	if len(parts) == 0 {
		return ""
	}
	return parts[0] + "…"
}

// actionBlocks renders buttons, 25 to a block with unique action_ids;
// *seq numbers actions blocks across the card for unique block_ids.
func actionBlocks(buttons []chat.Button, seq *int) (blocks []slackgo.Block, dropped int) {
	var els []slackgo.BlockElement
	used := map[string]int{}
	emit := func() {
		if len(els) == 0 {
			return
		}
		*seq++
		blocks = append(blocks, slackgo.NewActionBlock(fmt.Sprintf("actions_%d", *seq), els...))
		els = nil
		used = map[string]int{}
	}
	for _, btn := range buttons {
		if TextLen(btn.Value) > MaxButtonValue || btn.ID == "" {
			dropped++
			continue
		}
		if len(els) == maxActionsElements {
			emit()
		}
		id := cutRunes(btn.ID, maxActionID-8)
		used[id]++
		if n := used[id]; n > 1 {
			id = fmt.Sprintf("%s%s%d", id, actionIDSep, n)
		}
		label := strings.TrimSpace(oneLine(btn.Label))
		if label == "" {
			label = btn.ID
		}
		el := slackgo.NewButtonBlockElement(id, btn.Value, plain(cutRunes(label, maxButtonText)))
		switch btn.Style {
		case chat.StylePrimary:
			el = el.WithStyle(slackgo.StylePrimary)
		case chat.StyleDanger:
			el = el.WithStyle(slackgo.StyleDanger)
		}
		els = append(els, el)
	}
	emit()
	return blocks, dropped
}

// ActionIDOf returns the chat action ID of a Slack action_id made by
// ToBlocks (without the uniqueness suffix).
func ActionIDOf(actionID string) string {
	id, _, _ := strings.Cut(actionID, actionIDSep)
	return id
}

// trimBlocks keeps at most maxBlocks: the blocks in keep, then the newest
// others, with a context line counting what was dropped.
func trimBlocks(bs []slackgo.Block, keep map[int]bool) []slackgo.Block {
	if len(bs) <= maxBlocks {
		return bs
	}
	room := maxBlocks - 1 - len(keep) // one for the notice
	if room < 0 {
		room = 0
	}
	take := map[int]bool{}
	for i := len(bs) - 1; i >= 0 && room > 0; i-- {
		if !keep[i] {
			take[i] = true
			room--
		}
	}
	var out []slackgo.Block
	dropped, noticed := 0, false
	for i, b := range bs {
		if keep[i] || take[i] {
			if dropped > 0 && !noticed {
				out = append(out, nil) // placeholder for the notice
				noticed = true
			}
			out = append(out, b)
			continue
		}
		dropped++
	}
	for i, b := range out {
		if b == nil {
			out[i] = slackgo.NewContextBlock("", mrkdwn(fmt.Sprintf("_… %d earlier block(s) not shown._", dropped)))
		}
	}
	if len(out) > maxBlocks { // more actions blocks than fit: keep the last ones
		out = out[len(out)-maxBlocks:]
	}
	return out
}

// fallback is the notification text: the title and the start of the first
// text block, as one line of mrkdwn without code fences.
func fallback(c chat.Card) string {
	parts := []string{}
	if t := strings.TrimSpace(c.Title); t != "" {
		parts = append(parts, inline(oneLine(t), true))
	}
	for _, b := range c.Blocks {
		if b.Kind == chat.BlockText && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, oneLine(strings.ReplaceAll(Mrkdwn(b.Text), fence, "")))
			break
		}
	}
	s := strings.Join(parts, " — ")
	if TextLen(s) > maxFallback {
		if cut := chunk(s, maxFallback-1); len(cut) > 0 {
			s = cut[0] + "…"
		}
	}
	if strings.TrimSpace(s) == "" {
		s = "sandbot"
	}
	return s
}

// oneLine folds whitespace runs (newlines included) into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cutRunes cuts s to at most n (TextLen), ending with "…" when cut.
func cutRunes(s string, n int) string { return measure.Truncate(s, n) }
