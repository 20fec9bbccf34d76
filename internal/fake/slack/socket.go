package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is one Socket Mode websocket.
type wsConn struct {
	id      int
	ws      *websocket.Conn
	writeMu sync.Mutex // gorilla allows one concurrent writer
	done    chan struct{}
	once    sync.Once
}

func (c *wsConn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// drop closes the TCP connection without a close frame, like a network
// failure or a load balancer reset.
func (c *wsConn) drop() {
	c.once.Do(func() { close(c.done) })
	_ = c.ws.UnderlyingConn().Close()
}

var upgrader = websocket.Upgrader{
	// The client sends Origin: https://api.slack.com.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") == "" {
		http.Error(w, "missing ticket", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &wsConn{ws: ws, done: make(chan struct{})}
	hello := map[string]any{
		"type": "hello", "num_connections": 1,
		"debug_info":      map[string]any{"host": "fakeslack", "started": "2024-01-01 00:00:00.000", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": s.opts.AppID},
	}
	if err := c.write(hello); err != nil {
		c.drop()
		return
	}
	// Register the connection only after hello, so no envelope overtakes it.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.drop()
		return
	}
	s.nconn++
	s.opened++
	c.id = s.nconn
	s.conns[c.id] = c
	s.notifyLocked()
	s.mu.Unlock()

	go s.pingLoop(c)
	s.readLoop(c)
}

func (s *Server) forget(c *wsConn) {
	c.drop()
	s.mu.Lock()
	delete(s.conns, c.id)
	s.notifyLocked()
	s.mu.Unlock()
}

// pingLoop sends websocket PING control frames; without them slack-go's
// dead-man timer reconnects.
func (s *Server) pingLoop(c *wsConn) {
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.writeMu.Lock()
			err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
			c.writeMu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// readLoop records acks until the connection ends.
func (s *Server) readLoop(c *wsConn) {
	defer s.forget(c)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		now := time.Now()
		s.mu.Lock()
		a := Ack{EnvelopeID: ack.EnvelopeID, Payload: ack.Payload, At: now}
		for _, e := range s.sent {
			if e.ID == ack.EnvelopeID {
				a.Latency = now.Sub(e.At)
			}
		}
		s.acks = append(s.acks, a)
		s.notifyLocked()
		hook := s.afterAck
		s.afterAck = nil
		s.mu.Unlock()
		if hook != nil {
			hook(a)
		}
	}
}

// errNoConnection is returned when ctx ends before a client connects.
var errNoConnection = errors.New("fakeslack: no Socket Mode connection")

// send pushes an envelope on the newest open connection, waiting for one if
// none is open.
func (s *Server) send(ctx context.Context, typ string, payload json.RawMessage, retry int) (string, error) {
	return s.sendEnvelope(ctx, typ, payload, retry, false)
}

func (s *Server) sendEnvelope(ctx context.Context, typ string, payload json.RawMessage, retry int, unacked bool) (string, error) {
	for {
		s.mu.Lock()
		var c *wsConn
		for _, cc := range s.conns {
			if c == nil || cc.id > c.id {
				c = cc
			}
		}
		ch := s.changed
		if c == nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return "", fmt.Errorf("%w: %w", errNoConnection, ctx.Err())
			}
		}
		id := s.newIDLocked("env-")
		env := map[string]any{
			"envelope_id": id, "type": typ, "payload": payload,
			"accepts_response_payload": typ != "events_api",
			"retry_attempt":            retry, "retry_reason": "",
		}
		if retry > 0 {
			env["retry_reason"] = "timeout"
		}
		s.sent = append(s.sent, Envelope{ID: id, Type: typ, Payload: payload, Retry: retry, At: time.Now(), Conn: c.id, Unacked: unacked})
		s.notifyLocked()
		s.mu.Unlock()
		if err := c.write(env); err != nil {
			// The connection died under us; like Slack, try the next one.
			s.forget(c)
			continue
		}
		s.mu.Lock()
		hook := s.afterSend
		s.afterSend = nil
		s.mu.Unlock()
		if hook != nil {
			hook(Envelope{ID: id, Type: typ, Payload: payload, Retry: retry, Conn: c.id, Unacked: unacked})
		}
		if typ == "events_api" && retry < len(s.opts.RedeliverUnacked) {
			time.AfterFunc(s.opts.RedeliverUnacked[retry], func() { s.retryUnacked(id, typ, payload, retry+1) })
		}
		return id, nil
	}
}

// AfterNextSend calls fn once, right after the next envelope has been
// written to a client's websocket and before its ack can be awaited: a
// test kills the receiving bot there, to see what an event delivered to a
// bot that dies at once becomes. A later call replaces an unfired fn.
func (s *Server) AfterNextSend(fn func(Envelope)) {
	s.mu.Lock()
	s.afterSend = fn
	s.mu.Unlock()
}

// AfterNextAck calls fn once, right after the next ack has been recorded:
// a test kills the bot there, to see whether an acknowledged event had
// already been handed on. A later call replaces an unfired fn.
func (s *Server) AfterNextAck(fn func(Ack)) {
	s.mu.Lock()
	s.afterAck = fn
	s.mu.Unlock()
}

// retryUnacked sends an event again if envelope id was never acked, as
// Slack does (Options.RedeliverUnacked).
func (s *Server) retryUnacked(id, typ string, payload json.RawMessage, retry int) {
	s.mu.Lock()
	closed := s.closed
	acked := false
	for _, a := range s.acks {
		if a.EnvelopeID == id {
			acked = true
			break
		}
	}
	s.mu.Unlock()
	if closed || acked {
		return
	}
	// Slack waits for a connection; a closed server ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	go func() {
		for {
			s.mu.Lock()
			done, ch := s.closed, s.changed
			s.mu.Unlock()
			if done {
				cancel()
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	_, _ = s.sendEnvelope(ctx, typ, payload, retry, true)
}

// SendEvent pushes an events_api envelope carrying an Events API payload
// (see EventCallback) and returns its envelope ID.
func (s *Server) SendEvent(ctx context.Context, payload json.RawMessage) (string, error) {
	return s.send(ctx, "events_api", payload, 0)
}

// SendInteraction pushes an interactive envelope (block_actions,
// view_submission, message_action, …).
func (s *Server) SendInteraction(ctx context.Context, payload json.RawMessage) (string, error) {
	return s.send(ctx, "interactive", payload, 0)
}

// SendSlashCommand pushes a slash_commands envelope.
func (s *Server) SendSlashCommand(ctx context.Context, cmd SlashCommand) (string, error) {
	b, err := json.Marshal(s.slashPayload(cmd))
	if err != nil {
		return "", err
	}
	return s.send(ctx, "slash_commands", b, 0)
}

// Redeliver sends an envelope's payload again in a new envelope with
// retry_attempt set, as Slack does when an event was not acked in time.
func (s *Server) Redeliver(ctx context.Context, envelopeID string) (string, error) {
	s.mu.Lock()
	var orig *Envelope
	for i := range s.sent {
		if s.sent[i].ID == envelopeID {
			e := s.sent[i]
			orig = &e
		}
	}
	s.mu.Unlock()
	if orig == nil {
		return "", fmt.Errorf("fakeslack: redeliver: unknown envelope %q", envelopeID)
	}
	return s.send(ctx, orig.Type, orig.Payload, orig.Retry+1)
}

// Disconnect asks every open connection to reconnect with a
// {"type":"disconnect"} message (reason: "warning", "refresh_requested", …),
// as Slack does before rotating its servers. The client is expected to open
// a new connection and close the old one.
func (s *Server) Disconnect(reason string) {
	for _, c := range s.openConns() {
		_ = c.write(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "fakeslack"}})
	}
}

// DropConnections closes every websocket abruptly, without a close frame.
func (s *Server) DropConnections() {
	for _, c := range s.openConns() {
		s.forget(c)
	}
}

func (s *Server) openConns() []*wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*wsConn, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}
