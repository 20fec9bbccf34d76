package chat

// Card is a neutral rich message: a title and blocks. Converters in each
// adapter turn it into Slack blocks or Discord components within their
// limits, always with fallback text.
type Card struct {
	Title  string  `json:"title"`
	Blocks []Block `json:"blocks,omitempty"`
	// Key names a status card within its thread (its session's turn;
	// RenderTurn sets it). An adapter that implements CardFinder keeps it
	// in the message where the platform gives it back and people do not
	// see it, so a replica can find a card it did not post.
	Key string `json:"key,omitempty"`
	// Attachments are files that belong with the card: the full commands
	// of an approval too long to show on it. The watcher puts each in the
	// thread (Attacher) before it shows the card, so an approval never
	// appears without the text it refers to.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Attachment is a text file shown in a thread.
type Attachment struct {
	// Name is the file name (ASCII, no path).
	Name string `json:"name"`
	// Title is a human label for it.
	Title   string `json:"title,omitempty"`
	Content string `json:"content"`
}

// BlockKind says what a Block holds.
type BlockKind string

// Block kinds.
const (
	BlockText    BlockKind = "text"    // Markdown text
	BlockCode    BlockKind = "code"    // preformatted text
	BlockFields  BlockKind = "fields"  // label/value pairs
	BlockDivider BlockKind = "divider" // a rule
	BlockActions BlockKind = "actions" // buttons
	BlockContext BlockKind = "context" // small print
)

// Block is one part of a Card. Text of BlockText and BlockContext is
// Markdown (**bold**, _italic_, `code`, [text](url), "- " lists), which
// converters translate to their platform's dialect; BlockCode text is raw
// and the converter fences it.
type Block struct {
	Kind    BlockKind `json:"kind"`
	Text    string    `json:"text,omitempty"`
	Fields  []Field   `json:"fields,omitempty"`
	Buttons []Button  `json:"buttons,omitempty"`
	// Keep marks text that must be shown whole (a command awaiting
	// approval): converters may split it but never cut it.
	Keep bool `json:"keep,omitempty"`
}

// Field is a label/value pair.
type Field struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// ButtonStyle colours a button.
type ButtonStyle string

// Button styles.
const (
	StyleDefault ButtonStyle = ""
	StylePrimary ButtonStyle = "primary"
	StyleDanger  ButtonStyle = "danger"
)

// Button is an interactive button. ID is an Action* constant and Value what
// the click carries back (it must fit the platform's limits: Discord's
// custom_id is 100 characters including the ID).
type Button struct {
	ID    string      `json:"id"`
	Label string      `json:"label"`
	Style ButtonStyle `json:"style,omitempty"`
	Value string      `json:"value"`
}
