package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// runSocket receives events over Socket Mode until ctx ends. Every
// envelope's work runs on its own goroutine, and its ack goes out once the
// work has handed the event to the session or AckWithin has passed (see
// handedOff), so the loop never waits for Temporal. Disconnects and
// refresh requests reconnect inside socketmode's RunContext.
func (a *Adapter) runSocket(ctx context.Context) error {
	sm := socketmode.New(a.api)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-runErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: socket mode: %w (check SANDBOT_SLACK_APP_TOKEN)", err)
		case ev := <-sm.Events:
			a.onSocketEvent(ctx, sm, ev)
		}
	}
}

// handled is the done channel of an envelope with no work to wait for.
var handled = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (a *Adapter) onSocketEvent(ctx context.Context, sm *socketmode.Client, ev socketmode.Event) {
	// ackAfter acknowledges once done closes; at AckWithin, only if
	// always (slash commands, whose answer comes later through their
	// response_url and whose users would otherwise see a timeout for
	// every slow command) — events and clicks stay unacknowledged then.
	ackAfter := func(done <-chan struct{}, always bool) {
		if ev.Request == nil {
			return
		}
		id := ev.Request.EnvelopeID
		go func() {
			if !a.handedOff(ctx, done) && !always {
				a.log.Info("slack: not acknowledged: its handoff to the session took longer than AckWithin; Slack resends an event or tells the user", "envelope_id", id, "type", ev.Type)
				return
			}
			if err := sm.AckCtx(ctx, id, nil); err != nil && ctx.Err() == nil {
				a.log.Warn("slack: ack failed", "envelope_id", id, "err", err)
			}
		}()
	}
	switch ev.Type {
	case socketmode.EventTypeConnecting:
		a.log.Debug("slack: socket mode connecting")
		a.setDown("socket mode connecting")
	case socketmode.EventTypeConnected:
		a.log.Info("slack: socket mode connected")
		a.markReady()
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("slack: socket mode connection trouble; reconnecting", "event", ev.Type)
		a.setDown(fmt.Sprintf("socket mode connection trouble (%s); reconnecting", ev.Type))
	case socketmode.EventTypeDisconnect:
		a.log.Info("slack: socket mode disconnect requested; reconnecting")
		a.setDown("socket mode disconnected; reconnecting")
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("slack: socket mode authentication failed (check SANDBOT_SLACK_APP_TOKEN)")
		a.setDown("socket mode authentication failed (check SANDBOT_SLACK_APP_TOKEN)")
	// Work is registered before the ack goes out (so WaitIdle after an ack
	// sees it) and runs on its own goroutine.
	case socketmode.EventTypeEventsAPI:
		var done <-chan struct{} = handled
		if e, ok := ev.Data.(slackevents.EventsAPIEvent); ok {
			done = a.spawn("event", func(ctx context.Context) error { return a.onEventsAPI(ctx, e) })
		}
		ackAfter(done, false)
	case socketmode.EventTypeInteractive:
		var done <-chan struct{} = handled
		if cb, ok := ev.Data.(slackgo.InteractionCallback); ok {
			done = a.spawn("interaction", func(ctx context.Context) error { return a.onInteraction(ctx, cb) })
		}
		ackAfter(done, false)
	case socketmode.EventTypeSlashCommand:
		var done <-chan struct{} = handled
		if sc, ok := ev.Data.(slackgo.SlashCommand); ok {
			done = a.spawn("command", func(ctx context.Context) error { return a.onSlashCommand(ctx, sc) })
		}
		ackAfter(done, true)
	case socketmode.EventTypeErrorBadMessage:
		a.log.Warn("slack: unreadable socket mode message")
	}
}

// maxBody bounds HTTP-mode request bodies (Slack's are a few KB).
const maxBody = 1 << 20

// handler serves the HTTP mode endpoints: /slack/events (Events API),
// /slack/commands (slash commands) and /slack/interactivity (buttons,
// modals, shortcuts). Every request must carry a valid signature made with
// the signing secret and a timestamp within five minutes; anything else
// gets 401 and is not processed. Valid requests are answered once their
// work has handed them to the session or AckWithin has passed, like Socket
// Mode envelopes.
func (a *Adapter) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", a.verified(a.serveEvents))
	mux.HandleFunc("POST /slack/commands", a.verified(a.serveCommand))
	mux.HandleFunc("POST /slack/interactivity", a.verified(a.serveInteraction))
	return mux
}

// verified checks the request's signature and hands the handler the body.
func (a *Adapter) verified(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		sv, err := slackgo.NewSecretsVerifier(r.Header, a.cfg.SigningSecret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			a.log.Warn("slack: rejected an unverified request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r, body)
	}
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request, body []byte) {
	ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		http.Error(w, "cannot parse event: "+err.Error(), http.StatusBadRequest)
		return
	}
	if ev.Type == slackevents.URLVerification {
		var ch slackevents.ChallengeResponse
		if err := json.Unmarshal(body, &ch); err != nil {
			http.Error(w, "bad url_verification", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, ch.Challenge)
		return
	}
	if !a.handedOff(r.Context(), a.spawn("event", func(ctx context.Context) error { return a.onEventsAPI(ctx, ev) })) {
		notHandedOff(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *Adapter) serveCommand(w http.ResponseWriter, r *http.Request, _ []byte) {
	sc, err := slackgo.SlashCommandParse(r)
	if err != nil {
		http.Error(w, "cannot parse command", http.StatusBadRequest)
		return
	}
	// A command is answered within AckWithin whatever happens: its reply
	// comes through its response_url (see ackAfter).
	a.handedOff(r.Context(), a.spawn("command", func(ctx context.Context) error { return a.onSlashCommand(ctx, sc) }))
	w.WriteHeader(http.StatusOK)
}

func (a *Adapter) serveInteraction(w http.ResponseWriter, r *http.Request, body []byte) {
	form, err := url.ParseQuery(string(body))
	var cb slackgo.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		http.Error(w, "cannot parse interaction payload", http.StatusBadRequest)
		return
	}
	if !a.handedOff(r.Context(), a.spawn("interaction", func(ctx context.Context) error { return a.onInteraction(ctx, cb) })) {
		notHandedOff(w)
		return
	}
	w.WriteHeader(http.StatusOK) // an empty 200 also closes a submitted modal
}

// notHandedOff answers a request whose work did not reach the session
// within AckWithin: not a 200, so Slack retries an event and tells a
// clicking user the app did not respond (see handedOff).
func notHandedOff(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "still handing the request to the session; Slack may send it again", http.StatusServiceUnavailable)
}

// runHTTP serves Handler on ListenAddr until ctx ends.
func (a *Adapter) runHTTP(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("slack: listen on %s (SANDBOT_SLACK_LISTEN_ADDR): %w", a.cfg.ListenAddr, err)
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	a.mu.Lock()
	a.addr = ln.Addr().String()
	a.mu.Unlock()
	a.log.Info("slack: serving the Events API", "addr", a.addr)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.markReady()
	select {
	case err := <-errc:
		return fmt.Errorf("slack: http: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("slack: http shutdown: %w", err)
		}
		return nil
	}
}
