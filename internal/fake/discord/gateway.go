package fakediscord

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway intents the fake looks at.
const (
	intentGuilds         = 1 << 0
	intentGuildMembers   = 1 << 1
	intentGuildPresences = 1 << 8
	intentGuildMessages  = 1 << 9
	intentDirectMessages = 1 << 12
	intentMessageContent = 1 << 15
	privilegedIntents    = intentGuildMembers | intentGuildPresences | intentMessageContent
)

// gateway is the fake's websocket gateway. A gwSession outlives its
// connections: it keeps the sequence and the log of dispatched events so a
// client that reconnects with RESUME (op 6) gets what it missed.
type gateway struct {
	s        *Server
	upgrader websocket.Upgrader

	mu         sync.Mutex
	sessions   map[string]*gwSession
	conns      map[*gwConn]bool
	nextSess   int
	replayFrom int64 // >= 0: the next RESUME replays after this seq
	stats      GatewayStats
}

// GatewayStats counts what the gateway saw.
type GatewayStats struct {
	Connections     int // websocket connections accepted
	Identifies      int
	Resumes         int // successful RESUMEs
	HeartbeatsAcked int
	Dispatched      int // dispatch frames written to a connection
}

type gwFrame struct {
	seq  int64
	data []byte
}

type gwSession struct {
	id      string
	intents int
	seq     int64
	log     []gwFrame
	conn    *gwConn
	dead    bool
}

type gwConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	sess *gwSession
}

func newGateway(s *Server) *gateway {
	return &gateway{
		s:          s,
		upgrader:   websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		sessions:   map[string]*gwSession{},
		conns:      map[*gwConn]bool{},
		replayFrom: -1,
	}
}

func (c *gwConn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeRaw(b)
}

func (c *gwConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *gwConn) closeWith(code int, text string) {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

type gwPayload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
}

func (g *gateway) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := g.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	g.mu.Lock()
	g.conns[c] = true
	g.stats.Connections++
	g.mu.Unlock()
	g.s.notify()
	defer g.detach(c, false)

	hello := map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": g.s.opts.HeartbeatInterval.Milliseconds()}, "s": nil, "t": nil}
	if c.write(hello) != nil {
		return
	}
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			// A client closing with 1000 or 1001 ends its session, as on
			// Discord; any other close or a dropped connection keeps it
			// resumable.
			if errors.As(err, &ce) && (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) {
				g.detach(c, true)
			}
			return
		}
		var p gwPayload
		if json.Unmarshal(msg, &p) != nil {
			c.closeWith(4002, "Error while decoding payload.")
			return
		}
		switch p.Op {
		case 1:
			if c.write(map[string]any{"op": 11, "d": nil, "s": nil, "t": nil}) != nil {
				return
			}
			g.mu.Lock()
			g.stats.HeartbeatsAcked++
			g.mu.Unlock()
			g.s.notify()
		case 2:
			if !g.identify(c, p.D) {
				return
			}
		case 6:
			if !g.resume(c, p.D) {
				return
			}
		case 3, 4, 8:
			// presence, voice state and member requests: accepted, ignored
		default:
			c.closeWith(4001, "Unknown opcode.")
			return
		}
	}
}

func (g *gateway) tokenOK(tok string) bool {
	return strings.TrimPrefix(tok, "Bot ") == g.s.opts.Token
}

func (g *gateway) identify(c *gwConn, d json.RawMessage) bool {
	var id struct {
		Token   string `json:"token"`
		Intents int    `json:"intents"`
	}
	_ = json.Unmarshal(d, &id)
	if !g.tokenOK(id.Token) {
		c.closeWith(4004, "Authentication failed.")
		return false
	}
	if g.s.opts.DenyPrivilegedIntents && id.Intents&privilegedIntents != 0 {
		c.closeWith(4014, "Disallowed intent(s).")
		return false
	}
	g.mu.Lock()
	if c.sess != nil {
		c.sess.conn = nil
		c.sess.dead = true
	}
	g.nextSess++
	sess := &gwSession{id: "fake-session-" + strconv.Itoa(g.nextSess), intents: id.Intents, conn: c}
	g.sessions[sess.id] = sess
	c.sess = sess
	g.stats.Identifies++
	bot := g.s.BotUser().wire()
	guilds, creates := g.s.guildPayloads()
	ready := map[string]any{
		"v": 9, "user": bot, "session_id": sess.id, "resume_gateway_url": "ws://" + g.s.srv.Listener.Addr().String() + "/gw",
		"guilds": guilds, "private_channels": []any{}, "shard": []int{0, 1},
		"application": map[string]any{"id": g.s.opts.AppID, "flags": 0},
	}
	ok := g.sendLocked(sess, "READY", ready)
	if ok && sess.intents&intentGuilds != 0 {
		for _, gc := range creates {
			if ok = g.sendLocked(sess, "GUILD_CREATE", gc); !ok {
				break
			}
		}
	}
	g.mu.Unlock()
	g.s.notify()
	return ok
}

func (g *gateway) resume(c *gwConn, d json.RawMessage) bool {
	var rs struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	_ = json.Unmarshal(d, &rs)
	if !g.tokenOK(rs.Token) {
		c.closeWith(4004, "Authentication failed.")
		return false
	}
	g.mu.Lock()
	sess, ok := g.sessions[rs.SessionID]
	if !ok || sess.dead {
		g.mu.Unlock()
		return c.write(map[string]any{"op": 9, "d": false, "s": nil, "t": nil}) == nil
	}
	if old := sess.conn; old != nil && old != c {
		old.sess = nil
		go old.closeWith(4009, "Session timed out.")
	}
	sess.conn = c
	c.sess = sess
	from := rs.Seq
	if g.replayFrom >= 0 {
		from = g.replayFrom
		g.replayFrom = -1
	}
	ok = true
	for _, f := range sess.log {
		if f.seq > from {
			if ok = c.writeRaw(f.data) == nil; !ok {
				break
			}
			g.stats.Dispatched++
		}
	}
	if ok {
		ok = g.sendLocked(sess, "RESUMED", map[string]any{})
	}
	g.stats.Resumes++
	g.mu.Unlock()
	g.s.notify()
	return ok
}

// sendLocked appends a dispatch to the session's log and writes it if the
// session is connected. Callers hold g.mu.
func (g *gateway) sendLocked(sess *gwSession, event string, d any) bool {
	sess.seq++
	b, err := json.Marshal(map[string]any{"op": 0, "s": sess.seq, "t": event, "d": d})
	if err != nil {
		return false
	}
	sess.log = append(sess.log, gwFrame{seq: sess.seq, data: b})
	if sess.conn == nil {
		return true
	}
	if sess.conn.writeRaw(b) != nil {
		return false
	}
	g.stats.Dispatched++
	return true
}

// dispatch sends an event to every live session whose intents include
// need (0: no intent needed). build makes the payload for a session's
// intents.
func (g *gateway) dispatch(event string, need int, build func(intents int) any) {
	g.mu.Lock()
	for _, sess := range g.sessions {
		if sess.dead || (need != 0 && sess.intents&need == 0) {
			continue
		}
		g.sendLocked(sess, event, build(sess.intents))
	}
	g.mu.Unlock()
	g.s.notify()
}

// dispatchMessage sends MESSAGE_CREATE or MESSAGE_UPDATE for a message in
// channel c. Without the MESSAGE_CONTENT intent, content, embeds,
// attachments and components are blanked unless the message is in a DM,
// mentions the bot, or was sent by the bot, as on Discord.
func (g *gateway) dispatchMessage(event string, wire map[string]any, c *Channel, _ bool) {
	need := intentGuildMessages
	if c.Type == ChannelDM {
		need = intentDirectMessages
	}
	exempt := c.Type == ChannelDM
	if a, ok := wire["author"].(map[string]any); ok && a["id"] == g.s.opts.AppID {
		exempt = true
	}
	if ms, ok := wire["mentions"].([]any); ok {
		for _, m := range ms {
			if mm, ok := m.(map[string]any); ok && mm["id"] == g.s.opts.AppID {
				exempt = true
			}
		}
	}
	g.dispatch(event, need, func(intents int) any {
		if exempt || intents&intentMessageContent != 0 {
			return wire
		}
		red := map[string]any{}
		for k, v := range wire {
			red[k] = v
		}
		red["content"], red["embeds"], red["attachments"], red["components"] = "", []any{}, []any{}, []any{}
		return red
	})
}

// detach forgets a closed connection; end also ends its session.
func (g *gateway) detach(c *gwConn, end bool) {
	g.mu.Lock()
	delete(g.conns, c)
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
		if end {
			c.sess.dead = true
		}
	}
	g.mu.Unlock()
	_ = c.ws.Close()
	g.s.notify()
}

func (g *gateway) closeAll() {
	g.mu.Lock()
	conns := make([]*gwConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.NetConn().Close()
	}
}

// notify wakes Wait callers.
func (s *Server) notify() {
	s.mu.Lock()
	s.bump()
	s.mu.Unlock()
}
