// Package fakeslack is an in-process Slack that speaks the real wire
// protocol, so tests, benchmarks and demos drive the real slack-go client
// (v0.35.0) instead of a mock of our own interfaces.
//
// It serves the Web API methods sandbot uses (auth.test, chat.postMessage,
// chat.update, chat.delete, chat.postEphemeral, chat.getPermalink, views.open, .push
// and .update, files upload v2, conversations.replies, users.info, and
// Slack's agent surfaces: assistant.threads.setStatus,
// agents.sessions.setStatus with the native stop's agent_session_stopped
// event, chat.startStream/appendStream/stopStream) under URL(), Socket Mode
// (apps.connections.open, then a websocket with hello, pings, envelopes and
// acks), response_url webhooks, and helpers that sign HTTP-mode requests.
//
// Everything the client does is recorded (calls with their form values and
// decoded blocks, acks with their latency, messages as a channel would show
// them) and tests wait for conditions with WaitFor, never by sleeping.
// Limits are enforced the way Slack enforces them (msg_too_long,
// invalid_blocks), faults can be injected (429 with Retry-After, error
// codes), and chat.update calls are checked against a rate budget so a test
// can assert that no budget was violated.
package fakeslack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	BotToken      string // default "xoxb-fake-bot-token"
	AppToken      string // default "xapp-fake-app-token"
	SigningSecret string // default "fake-signing-secret"
	TeamID        string // default "T0001"
	TeamDomain    string // default "fake"
	AppID         string // default "A0001"
	BotUserID     string // default "UBOT"
	BotID         string // default "BBOT"
	BotName       string // default "sandbot"

	// PingInterval is how often the websocket sends PING frames (real Slack:
	// a few seconds; the client gives up after 30 s without one).
	// Default 100 ms.
	PingInterval time.Duration
	// TextLimit is the length of `text` beyond which chat.postMessage and
	// chat.update answer msg_too_long. Default 4,000.
	TextLimit int
	// UpdatesPerMinute is the workspace-wide chat.update budget (Tier 3).
	// Default 50.
	UpdatesPerMinute int
	// MinUpdateInterval and UpdateBurst are the per-message pace of
	// chat.update: a message may take UpdateBurst updates back to back,
	// then one more per MinUpdateInterval (a token bucket, refilled one
	// update per MinUpdateInterval). An update beyond that counts as a
	// violation. Zero MinUpdateInterval: not checked.
	MinUpdateInterval time.Duration
	// UpdateBurst defaults to DefaultUpdateBurst; 1 makes every update of
	// a message keep MinUpdateInterval from the one before.
	UpdateBurst int
	// DeletesPerMinute is the workspace-wide chat.delete budget (Tier 3).
	// Default DefaultDeletesPerMinute.
	DeletesPerMinute int
	// RateLimitOverBudget makes chat.update answer 429 (as Slack would)
	// instead of only recording a violation when the per-minute budget is
	// exceeded.
	RateLimitOverBudget bool
	// TriggerTTL is how long a trigger_id stays valid for views.open (real
	// Slack: 3 s). Zero: triggers do not expire, so tests never depend on
	// timing.
	TriggerTTL time.Duration
	// AgentApp says the app is declared as an agent (features.agent_view):
	// only then does agents.sessions.setStatus work (see assistant.go).
	AgentApp bool
	// Users are the workspace's members that users.info knows; it answers
	// user_not_found for anyone else. Payloads naming a known user carry
	// its Name as the username.
	Users []User
	// NoFilesRead makes the bot token lack files:read: url_private_download
	// answers with a sign-in page, as Slack does.
	NoFilesRead bool
	// RedeliverUnacked are the waits after which an events_api envelope
	// that nobody acknowledged is sent again (retry_attempt 1, 2, …;
	// retry_reason "timeout"), each wait counted from the delivery before.
	// Slack retries an unacknowledged event three times: about 3 s, 1 min
	// and 5 min apart. Empty: never, so tests that leave events unacked on
	// purpose see no retries of their own.
	RedeliverUnacked []time.Duration
}

// DefaultUpdateBurst is the per-message burst of chat.update the fake
// accepts unless Options.UpdateBurst says otherwise: the short burst
// sandbot's Slack adapter allows itself (chat/slack DefaultEditBurst).
const DefaultUpdateBurst = 4

func (o *Options) defaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.BotToken, "xoxb-fake-bot-token")
	def(&o.AppToken, "xapp-fake-app-token")
	def(&o.SigningSecret, "fake-signing-secret")
	def(&o.TeamID, "T0001")
	def(&o.TeamDomain, "fake")
	def(&o.AppID, "A0001")
	def(&o.BotUserID, "UBOT")
	def(&o.BotID, "BBOT")
	def(&o.BotName, "sandbot")
	if o.PingInterval <= 0 {
		o.PingInterval = 100 * time.Millisecond
	}
	if o.TextLimit <= 0 {
		o.TextLimit = 4000
	}
	if o.UpdatesPerMinute <= 0 {
		o.UpdatesPerMinute = 50
	}
	if o.UpdateBurst <= 0 {
		o.UpdateBurst = DefaultUpdateBurst
	}
	if o.DeletesPerMinute <= 0 {
		o.DeletesPerMinute = DefaultDeletesPerMinute
	}
}

// Server is a fake Slack workspace. All methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change
	seq     int           // ts and ID counter
	calls   []Call
	acks    []Ack
	sent    []Envelope
	hooks   []Hook
	msgs    map[string][]*Message // channel → messages in ts order
	deleted map[string][]*Message // channel → messages chat.delete took, in delete order
	deletes []time.Time           // chat.delete calls in the last minute
	files   map[string]*File
	views   map[string]*openedView
	trigs   map[string]time.Time // trigger_id → issued
	vtrigs  map[string]string    // trigger_id of a click in a modal → its view
	faults  map[string][]Fault
	holds   map[string][]chan struct{} // see HoldNext
	budget  budget
	agent   agentState
	viols   []Violation
	conns   map[int]*wsConn
	users   map[string]User
	nconn   int
	opened  int
	closed  bool
	// afterSend is called once, after the next envelope is written (see
	// AfterNextSend); afterAck once, after the next ack is recorded.
	afterSend func(Envelope)
	afterAck  func(Ack)
}

// New starts a fake Slack on a local port. Call Close when done.
func New(opts Options) *Server {
	opts.defaults()
	s := &Server{
		opts:    opts,
		changed: make(chan struct{}),
		msgs:    map[string][]*Message{},
		deleted: map[string][]*Message{},
		files:   map[string]*File{},
		views:   map[string]*openedView{},
		trigs:   map[string]time.Time{},
		faults:  map[string][]Fault{},
		holds:   map[string][]chan struct{}{},
		conns:   map[int]*wsConn{},
		budget:  budget{full: map[string]time.Time{}},
		users:   map[string]User{},
	}
	for _, u := range opts.Users {
		s.users[u.ID] = u
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.serveAPI)
	mux.HandleFunc("/upload/{file}", s.serveUpload)
	mux.HandleFunc("GET /files-pri/{file}/download/{name}", s.serveDownload)
	mux.HandleFunc("/link", s.serveSocket)
	mux.HandleFunc("/response/{id}", s.serveResponseURL)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close drops every websocket and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*wsConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Options returns the effective options (defaults filled in).
func (s *Server) Options() Options { return s.opts }

// URL is the Web API base for slack.OptionAPIURL, with the trailing slash the
// client needs (it appends the method name).
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// BaseURL is the server root, for example http://127.0.0.1:PORT.
func (s *Server) BaseURL() string { return s.srv.URL }

// notifyLocked wakes every WaitFor. s.mu must be held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextSeqLocked returns a fresh counter value. s.mu must be held.
func (s *Server) nextSeqLocked() int {
	s.seq++
	return s.seq
}

// NewTS returns a fresh message timestamp in Slack's "seconds.micros" form.
// Timestamps increase strictly, so they order messages like Slack's do.
func (s *Server) NewTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newTSLocked()
}

func (s *Server) newTSLocked() string {
	n := s.nextSeqLocked()
	return fmt.Sprintf("%d.%06d", 1700000000+n/10000, (n%10000)*100)
}

func (s *Server) newIDLocked(prefix string) string {
	return fmt.Sprintf("%s%06d", prefix, s.nextSeqLocked())
}

// WaitFor blocks until cond is true for a snapshot of the fake's state, or
// ctx ends. cond runs without the lock held, on a copy, and is re-evaluated
// after every change (call, ack, connection, message), so tests never sleep.
// It returns the snapshot that satisfied cond, or an error naming why it
// gave up.
func (s *Server) WaitFor(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	for {
		s.mu.Lock()
		snap := s.snapshotLocked()
		ch := s.changed
		s.mu.Unlock()
		if cond(snap) {
			return snap, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return snap, fmt.Errorf("fakeslack: condition not met: %w (%s)", ctx.Err(), snap.Summary())
		}
	}
}

// Snapshot returns a copy of the current state.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() Snapshot {
	snap := Snapshot{
		Calls:       append([]Call(nil), s.calls...),
		Acks:        append([]Ack(nil), s.acks...),
		Sent:        append([]Envelope(nil), s.sent...),
		Hooks:       append([]Hook(nil), s.hooks...),
		Violations:  append([]Violation(nil), s.viols...),
		Connections: s.opened,
		Open:        len(s.conns),
		Messages:    map[string][]Message{},
		Deleted:     map[string][]Message{},
		Files:       map[string]File{},
	}
	for ch, ms := range s.deleted {
		out := make([]Message, len(ms))
		for i, m := range ms {
			out[i] = *m
			out[i].Reactions = slices.Clone(m.Reactions)
		}
		snap.Deleted[ch] = out
	}
	for ch, ms := range s.msgs {
		out := make([]Message, len(ms))
		for i, m := range ms {
			out[i] = *m
			out[i].Reactions = slices.Clone(m.Reactions)
		}
		snap.Messages[ch] = out
	}
	for id, f := range s.files {
		snap.Files[id] = *f
	}
	return snap
}

// Snapshot is a copy of the fake's state at one moment.
type Snapshot struct {
	// Calls are Web API calls in arrival order (including rejected ones).
	Calls []Call
	// Acks are Socket Mode acks in arrival order.
	Acks []Ack
	// Sent are envelopes pushed to the client.
	Sent []Envelope
	// Hooks are posts to response_url.
	Hooks []Hook
	// Violations of the chat.update and chat.delete budgets.
	Violations []Violation
	// Connections counts websockets ever accepted; Open those still open.
	Connections int
	Open        int
	// Messages per channel in ts order, as conversations.history would list
	// them (replies included): a deleted reply is not among them, a deleted
	// thread parent is its tombstone.
	Messages map[string][]Message
	// Deleted are the messages chat.delete took, per channel in delete
	// order, as they were just before (Posted and Deleted say how long
	// people could read them).
	Deleted map[string][]Message
	// Files uploaded and completed, by ID.
	Files map[string]File
}

// CallsTo returns the calls of one method that Slack answered with ok:true.
func (s Snapshot) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls {
		if c.Method == method && c.OK() {
			out = append(out, c)
		}
	}
	return out
}

// AllCallsTo returns every call of one method, failed ones included.
func (s Snapshot) AllCallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Ack returns the ack of an envelope.
func (s Snapshot) Ack(envelopeID string) (Ack, bool) {
	for _, a := range s.Acks {
		if a.EnvelopeID == envelopeID {
			return a, true
		}
	}
	return Ack{}, false
}

// Acked reports whether every given envelope was acked.
func (s Snapshot) Acked(envelopeIDs ...string) bool {
	for _, id := range envelopeIDs {
		if _, ok := s.Ack(id); !ok {
			return false
		}
	}
	return true
}

// Message returns the message with ts in channel.
func (s Snapshot) Message(channel, ts string) (Message, bool) {
	for _, m := range s.Messages[channel] {
		if m.TS == ts {
			return m, true
		}
	}
	return Message{}, false
}

// Thread returns the root and replies of a thread, in ts order.
func (s Snapshot) Thread(channel, threadTS string) []Message {
	var out []Message
	for _, m := range s.Messages[channel] {
		if m.TS == threadTS || m.ThreadTS == threadTS {
			out = append(out, m)
		}
	}
	return out
}

// BotMessages returns the bot's messages in a thread.
func (s Snapshot) BotMessages(channel, threadTS string) []Message {
	var out []Message
	for _, m := range s.Thread(channel, threadTS) {
		if m.BotID != "" {
			out = append(out, m)
		}
	}
	return out
}

// Summary is a one-line description used in WaitFor errors.
func (s Snapshot) Summary() string {
	counts := map[string]int{}
	for _, c := range s.Calls {
		counts[c.Method]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "calls=%v acks=%d sent=%d hooks=%d conns=%d open=%d violations=%d",
		counts, len(s.Acks), len(s.Sent), len(s.Hooks), s.Connections, s.Open, len(s.Violations))
	return b.String()
}
