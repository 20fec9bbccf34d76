package discord

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// Discord's message limits the converters keep to. Lengths are counted in
// UTF-16 code units (textLen), which is never less than what Discord
// counts, so a message within them is never refused for size.
const (
	MaxContent          = 2000
	MaxEmbedDescription = 4096
	MaxEmbedTotal       = 6000
	MaxEmbedFooter      = 2048
	MaxButtonsPerRow    = 5
	MaxRows             = 5
	MaxCustomID         = 100
	MaxButtonLabel      = 80
	maxChoices          = 25
	// footerBudget keeps description + footer within MaxEmbedTotal.
	footerBudget = MaxEmbedTotal - MaxEmbedDescription - 100
	// rule is how a divider block is drawn.
	rule = "────────────"
	// embedColor is Discord's blurple, so status cards look alike.
	embedColor = 0x5865F2
)

// Message is a Discord message body converted from a chat.Card: fallback
// content, at most one embed and the button rows. Its methods give the
// discordgo request types for each way of sending it.
type Message struct {
	Content    string
	Embeds     []*discordgo.MessageEmbed
	Components []discordgo.MessageComponent
}

// noMentions stops rendered text (user names, model output) from pinging
// anyone: Discord parses no mentions out of content.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// Send is the body of a new channel message.
func (m Message) Send() *discordgo.MessageSend {
	return &discordgo.MessageSend{Content: m.Content, Embeds: m.embeds(), Components: m.components(), AllowedMentions: noMentions()}
}

// Edit is the body of an edit that replaces the whole message: embeds and
// buttons absent from m are removed.
func (m Message) Edit(channelID, messageID string) *discordgo.MessageEdit {
	e := discordgo.NewMessageEdit(channelID, messageID)
	content, embeds, comps := m.Content, m.embeds(), m.components()
	e.Content, e.Embeds, e.Components, e.AllowedMentions = &content, &embeds, &comps, noMentions()
	return e
}

// WebhookEdit is the body of an interaction response edit (@original).
func (m Message) WebhookEdit() *discordgo.WebhookEdit {
	content, embeds, comps := m.Content, m.embeds(), m.components()
	return &discordgo.WebhookEdit{Content: &content, Embeds: &embeds, Components: &comps, AllowedMentions: noMentions()}
}

// WebhookParams is the body of an interaction follow-up.
func (m Message) WebhookParams(ephemeral bool) *discordgo.WebhookParams {
	p := &discordgo.WebhookParams{Content: m.Content, Embeds: m.embeds(), Components: m.components(), AllowedMentions: noMentions()}
	if ephemeral {
		p.Flags = discordgo.MessageFlagsEphemeral
	}
	return p
}

func (m Message) embeds() []*discordgo.MessageEmbed {
	if m.Embeds == nil {
		return []*discordgo.MessageEmbed{}
	}
	return m.Embeds
}

func (m Message) components() []discordgo.MessageComponent {
	if m.Components == nil {
		return []discordgo.MessageComponent{}
	}
	return m.Components
}

// ToMessage converts a card: the title becomes the message content (the
// fallback text shown in notifications), the blocks one embed's
// description (Markdown, which Discord renders there), a last context
// block the embed's footer (plain text: Discord renders no Markdown in
// footers), and action blocks rows of buttons. Text is cut to Discord's
// limits without breaking code blocks. It fails only for cards no Discord
// message can carry: more than 25 buttons, or a button whose custom_id
// cannot fit 100 characters (see CustomID).
func ToMessage(c chat.Card) (Message, error) {
	var m Message
	var desc []string
	var footer string
	for i, b := range c.Blocks {
		switch b.Kind {
		case chat.BlockText:
			if t := strings.TrimSpace(safetext.Text(b.Text)); t != "" {
				desc = append(desc, t)
			}
		case chat.BlockCode:
			desc = append(desc, "```\n"+codeSafe(strings.TrimRight(b.Text, "\n"))+"\n```")
		case chat.BlockFields:
			for _, f := range b.Fields {
				desc = append(desc, "**"+oneLine(safetext.Line(f.Label))+":** "+safetext.Text(f.Value))
			}
		case chat.BlockDivider:
			desc = append(desc, rule)
		case chat.BlockContext:
			t := strings.TrimSpace(safetext.Text(b.Text))
			if t == "" {
				continue
			}
			// The card's last block, usually the turn footer, goes in the
			// embed footer, which Discord shows without Markdown, so it is
			// made plain text there; other small print is Discord subtext.
			if i == len(c.Blocks)-1 {
				footer = strings.TrimSpace(plainText(t))
				continue
			}
			for _, line := range strings.Split(t, "\n") {
				desc = append(desc, "-# "+line)
			}
		case chat.BlockActions:
			rows, err := buttonRows(b.Buttons)
			if err != nil {
				return Message{}, err
			}
			m.Components = append(m.Components, rows...)
		default:
			if t := strings.TrimSpace(safetext.Text(b.Text)); t != "" {
				desc = append(desc, t)
			}
		}
	}
	if len(m.Components) > MaxRows {
		return Message{}, fmt.Errorf("discord: card has %d rows of buttons; a message holds at most %d", len(m.Components), MaxRows)
	}
	m.Content = fallback(c, desc)
	if len(desc) > 0 || footer != "" {
		e := &discordgo.MessageEmbed{Type: discordgo.EmbedTypeRich, Color: embedColor}
		e.Description = clampMarkdown(strings.Join(desc, "\n"), MaxEmbedDescription)
		if footer != "" {
			e.Footer = &discordgo.MessageEmbedFooter{Text: clampPlain(footer, footerBudget)}
		}
		if c.Key != "" {
			e.URL = CardKeyURL(c.Key)
		}
		m.Embeds = []*discordgo.MessageEmbed{e}
	}
	return m, nil
}

// cardKeyBase is where a status card keeps its chat.Card.Key: its embed's
// url, which Discord returns with the message (so FindCards can read it)
// and shows nowhere, since the url only links an embed's title and a
// card's embed has none. Discord takes only http(s) URLs there; .invalid
// never resolves (RFC 2606), so nothing is ever fetched or opened.
const cardKeyBase = "https://sandbot.invalid/card/"

// CardKeyURL is the embed url that carries a card's key.
func CardKeyURL(key string) string { return cardKeyBase + url.PathEscape(key) }

// fallback is the message content: the card's title, or the start of its
// first text when it has none.
func fallback(c chat.Card, desc []string) string {
	t := strings.TrimSpace(c.Title)
	if t == "" && len(desc) > 0 {
		t = oneLine(desc[0])
	}
	if t == "" {
		t = "\u200b" // a message needs some content or an embed
	}
	return clampPlain(t, 200)
}

// buttonRows packs buttons five to a row.
func buttonRows(btns []chat.Button) ([]discordgo.MessageComponent, error) {
	var rows []discordgo.MessageComponent
	var row []discordgo.MessageComponent
	seen := map[string]bool{}
	for _, b := range btns {
		id, err := CustomID(b.ID, b.Value)
		if err != nil {
			return nil, err
		}
		if seen[id] {
			return nil, fmt.Errorf("discord: two buttons share the custom_id %q; Discord refuses duplicates", id)
		}
		seen[id] = true
		label := strings.TrimSpace(b.Label)
		if label == "" {
			label = b.ID
		}
		row = append(row, discordgo.Button{Label: clampPlain(label, MaxButtonLabel), Style: buttonStyle(b.Style), CustomID: id})
		if len(row) == MaxButtonsPerRow {
			rows = append(rows, discordgo.ActionsRow{Components: row})
			row = nil
		}
	}
	if len(row) > 0 {
		rows = append(rows, discordgo.ActionsRow{Components: row})
	}
	return rows, nil
}

func buttonStyle(s chat.ButtonStyle) discordgo.ButtonStyle {
	switch s {
	case chat.StylePrimary:
		return discordgo.PrimaryButton
	case chat.StyleDanger:
		return discordgo.DangerButton
	}
	return discordgo.SecondaryButton
}

// customIDSep separates the action ID from the value in a custom_id.
const customIDSep = ":"

// CustomID is the one place a button's custom_id is made: action + ":" +
// value, at most 100 characters. An approval value too long for that is
// re-encoded in the core's shorter thread-relative form (buttons are
// always clicked in the session's thread, so it still names the session);
// anything else that does not fit is an error naming the limit.
func CustomID(action, value string) (string, error) {
	if action == "" || strings.Contains(action, customIDSep) {
		return "", fmt.Errorf("discord: button action ID %q must be non-empty and free of %q", action, customIDSep)
	}
	id := action + customIDSep + value
	if textLen(id) <= MaxCustomID {
		return id, nil
	}
	if wf, call, err := chat.DecodeApproval(value); err == nil && wf != "" {
		short, err := chat.EncodeApprovalCompact(wf, call, MaxCustomID-len(action)-len(customIDSep))
		if err == nil {
			return action + customIDSep + short, nil
		}
	}
	return "", fmt.Errorf("discord: custom_id for button %q is %d characters; Discord allows %d (action ID, %q and value)",
		action, textLen(id), MaxCustomID, customIDSep)
}

// ParseCustomID splits a custom_id made by CustomID.
func ParseCustomID(id string) (action, value string, err error) {
	action, value, ok := strings.Cut(id, customIDSep)
	if !ok || action == "" {
		return "", "", errors.New("discord: custom_id " + clampPlain(id, 40) + " is not action:value")
	}
	return action, value, nil
}

// CodeLen is the length of text inside a code block as ToMessage writes
// it, in Discord's units; the core uses it to decide whether a command
// awaiting approval fits the card whole.
func CodeLen(text string) int { return textLen(codeSafe(text)) }

// codeSafe makes text safe inside a ``` block: controls and bidi
// overrides are shown escaped (chat/internal/safetext), and every run of
// three backticks gets a zero-width space, so the text can neither close
// the block nor look different from what it is (a lookalike character
// would show a different command than the one that runs).
func codeSafe(s string) string {
	s = safetext.Text(s)
	if !strings.Contains(s, "```") {
		return s
	}
	var b strings.Builder
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			if run == 2 {
				b.WriteString("\u200b")
				run = 0
			}
			run++
		} else {
			run = 0
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clampPlain cuts s to at most n UTF-16 units, ending with "…" when cut.
func clampPlain(s string, n int) string { return measure.Truncate(s, n) }

// clampMarkdown cuts Markdown to at most n UTF-16 units without leaving a
// code block open, ending with "…" when cut.
func clampMarkdown(s string, n int) string {
	if textLen(s) <= n {
		return s
	}
	parts := SplitMarkdown(s, n-2)
	if len(parts) == 0 {
		return ""
	}
	return parts[0] + "\n…"
}
