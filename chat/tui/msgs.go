package tui

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// Messages from the Adapter (core goroutines) to the model.
type (
	// cardMsg is a posted or edited card; ts is its turn's state when the
	// card is a turn's progress card.
	cardMsg struct {
		th   chat.Thread
		ref  string
		card chat.Card
		ts   *session.TurnState
	}
	textMsg struct {
		th   chat.Thread
		ref  string
		text string
	}
	// noticeMsg is a line of the front end itself; th zero means the
	// current session.
	noticeMsg struct {
		th   chat.Thread
		text string
	}
	// historyMsg is a session's earlier transcript, read when it is
	// first opened (entries nil when it has none).
	historyMsg struct {
		th      chat.Thread
		entries []session.HistoryEntry
	}
	// historyReadyMsg is that transcript drawn, ready to show.
	historyReadyMsg struct {
		th    chat.Thread
		items []*item
	}
	turnMsg struct {
		th chat.Thread
		ts session.TurnState
	}
	sessionsMsg struct {
		rows []sessionRow
		err  error
	}
	refreshMsg struct{}
)

// actions are what the model asks of the core. Each is run on its own
// goroutine (a tea.Cmd), never on the UI goroutine.
type actions struct {
	// message sends text to th's session; backend, when set, is where a
	// session the message starts runs (chat.Message.Backend).
	message func(th chat.Thread, text, backend string)
	action  func(th chat.Thread, id, value, reason string)
	list    func()
	turn    func(th chat.Thread)
	history func(th chat.Thread)
}

// sessionRow is one session in the picker.
type sessionRow struct {
	th           chat.Thread
	title        string
	backend      string
	turns        int
	status       session.TurnStatus
	parent       string // workflow ID of the session it was forked from
	created      time.Time
	lastActivity time.Time
	depth        int
}

// newEventID is unique across runs: sessions persist, and the workflow
// ignores an event ID it has seen.
func newEventID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "tui-" + hex.EncodeToString(b[:])
}
