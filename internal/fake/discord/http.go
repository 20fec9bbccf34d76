package fakediscord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// Routes the fake serves, as ServeMux patterns. RateLimitNext takes these.
const (
	RouteGateway         = "GET /api/v9/gateway"
	RouteGatewayBot      = "GET /api/v9/gateway/bot"
	RouteMe              = "GET /api/v9/users/@me"
	RouteGlobalCommands  = "PUT /api/v9/applications/{app}/commands"
	RouteGuildCommands   = "PUT /api/v9/applications/{app}/guilds/{guild}/commands"
	RouteGetGlobalCmds   = "GET /api/v9/applications/{app}/commands"
	RouteGetGuildCmds    = "GET /api/v9/applications/{app}/guilds/{guild}/commands"
	RouteGetChannel      = "GET /api/v9/channels/{channel}"
	RouteEditChannel     = "PATCH /api/v9/channels/{channel}"
	RouteCreateMessage   = "POST /api/v9/channels/{channel}/messages"
	RouteGetMessage      = "GET /api/v9/channels/{channel}/messages/{message}"
	RouteListMessages    = "GET /api/v9/channels/{channel}/messages"
	RouteEditMessage     = "PATCH /api/v9/channels/{channel}/messages/{message}"
	RouteDeleteMessage   = "DELETE /api/v9/channels/{channel}/messages/{message}"
	RouteStartThread     = "POST /api/v9/channels/{channel}/messages/{message}/threads"
	RouteAddReaction     = "PUT /api/v9/channels/{channel}/messages/{message}/reactions/{emoji}/@me"
	RouteRemoveReaction  = "DELETE /api/v9/channels/{channel}/messages/{message}/reactions/{emoji}/@me"
	RouteStartThreadBare = "POST /api/v9/channels/{channel}/threads"
	RouteCallback        = "POST /api/v9/interactions/{id}/{token}/callback"
	RouteFollowUp        = "POST /api/v9/webhooks/{app}/{token}"
	RouteWebhookGet      = "GET /api/v9/webhooks/{app}/{token}/messages/{message}"
	RouteWebhookEdit     = "PATCH /api/v9/webhooks/{app}/{token}/messages/{message}"
	RouteWebhookDelete   = "DELETE /api/v9/webhooks/{app}/{token}/messages/{message}"
)

// Discord JSON error codes the fake returns.
const (
	CodeUnknownChannel     = 10003
	CodeUnknownMessage     = 10008
	CodeUnknownEmoji       = 10014
	CodeUnknownWebhook     = 10015
	CodeUnknownInteraction = 10062
	CodeCannotEditOthers   = 50005
	CodeEmptyMessage       = 50006
	CodeInvalidToken       = 50027
	CodeInvalidFormBody    = 50035
	CodeAlreadyAcked       = 40060
	CodeMaxReactions       = 30010
	CodeThreadExists       = 160004
)

// request is a decoded REST request.
type request struct {
	JSON  json.RawMessage
	Files []File
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, req *request)

// routes builds the mux. Every REST route goes through serve, which
// records the request, checks the bot token, and applies injected rate
// limits before the route's handler runs.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	bot := func(pattern string, h handlerFunc) { mux.HandleFunc(pattern, s.serve(pattern, true, h)) }
	hook := func(pattern string, h handlerFunc) { mux.HandleFunc(pattern, s.serve(pattern, false, h)) }

	bot(RouteGateway, s.handleGateway)
	bot(RouteGatewayBot, s.handleGatewayBot)
	bot(RouteMe, s.handleMe)
	bot(RouteGlobalCommands, s.handlePutCommands)
	bot(RouteGuildCommands, s.handlePutCommands)
	bot(RouteGetGlobalCmds, s.handleGetCommands)
	bot(RouteGetGuildCmds, s.handleGetCommands)
	bot(RouteGetChannel, s.handleGetChannel)
	bot(RouteListMessages, s.handleListMessages)
	bot(RouteEditChannel, s.handleEditChannel)
	bot(RouteCreateMessage, s.handleCreateMessage)
	bot(RouteGetMessage, s.handleGetMessage)
	bot(RouteEditMessage, s.handleEditMessage)
	bot(RouteDeleteMessage, s.handleDeleteMessage)
	bot(RouteStartThread, s.handleStartThread)
	bot(RouteAddReaction, s.handleAddReaction)
	bot(RouteRemoveReaction, s.handleRemoveReaction)
	bot(RouteStartThreadBare, s.handleStartThreadBare)
	hook(RouteCallback, s.handleCallback)
	hook(RouteFollowUp, s.handleFollowUp)
	hook(RouteWebhookGet, s.handleWebhookGet)
	hook(RouteWebhookEdit, s.handleWebhookEdit)
	hook(RouteWebhookDelete, s.handleWebhookDelete)

	mux.HandleFunc("GET /gw", s.gw.serveWS)
	mux.HandleFunc("GET /attachments/{channel}/{id}/{name}", s.serveAttachment)
	mux.HandleFunc("GET /gw/", s.gw.serveWS)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.record(Record{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: 404})
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, 0, "404: Not Found", nil)
	})
	return mux
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) serve(pattern string, needBot bool, h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		req, perr := readRequest(r)
		sw := &statusWriter{ResponseWriter: w, status: 200}
		defer func() {
			s.mu.Lock()
			s.record(Record{At: at, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: sw.status,
				Body: req.JSON, Files: req.Files, Auth: r.Header.Get("Authorization")})
			s.mu.Unlock()
		}()
		if needBot && r.Header.Get("Authorization") != "Bot "+s.opts.Token {
			writeError(sw, http.StatusUnauthorized, 0, "401: Unauthorized", nil)
			return
		}
		if perr != nil {
			writeError(sw, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body: "+perr.Error(), nil)
			return
		}
		if s.takeRateLimit(sw, pattern) || s.takeBudget(sw, r, pattern, needBot) {
			return
		}
		h(sw, r, req)
	}
}

// readRequest reads a JSON body or a multipart body with payload_json and
// files[n] parts, the two shapes Discord accepts.
func readRequest(r *http.Request) (*request, error) {
	req := &request{}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxUploadBytes+1<<20))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxUploadBytes+(1<<20)-1 {
		return req, fmt.Errorf("request entity too large")
	}
	ct := r.Header.Get("Content-Type")
	if len(body) == 0 {
		return req, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return req, fmt.Errorf("bad Content-Type %q", ct)
	}
	switch mt {
	case "application/json":
		if !json.Valid(body) {
			return req, fmt.Errorf("body is not valid JSON")
		}
		req.JSON = body
		return req, nil
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return req, fmt.Errorf("multipart: %w", err)
			}
			data, err := io.ReadAll(p)
			if err != nil {
				return req, fmt.Errorf("multipart: %w", err)
			}
			switch name := p.FormName(); {
			case name == "payload_json":
				if !json.Valid(data) {
					return req, fmt.Errorf("payload_json is not valid JSON")
				}
				req.JSON = data
			case strings.HasPrefix(name, "files["):
				req.Files = append(req.Files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
			default:
				return req, fmt.Errorf("unexpected multipart field %q", name)
			}
		}
		return req, nil
	default:
		return req, fmt.Errorf("unsupported Content-Type %q", mt)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes Discord's JSON error shape:
// {"code":50035,"errors":{...},"message":"Invalid Form Body"}.
func writeError(w http.ResponseWriter, status, code int, msg string, errs map[string]any) {
	body := map[string]any{"code": code, "message": msg}
	if errs != nil {
		body["errors"] = errs
	}
	writeJSON(w, status, body)
}

// formErrors collects field errors in Discord's nested shape, for example
// {"content":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH","message":"..."}]}}.
type formErrors map[string]any

// add records an error at path (keys and array indexes as strings).
func (f formErrors) add(path []string, code, msg string) {
	m := map[string]any(f)
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	list, _ := m["_errors"].([]any)
	m["_errors"] = append(list, map[string]any{"code": code, "message": msg})
}

func (f formErrors) write(w http.ResponseWriter) bool {
	if len(f) == 0 {
		return false
	}
	writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", f)
	return true
}
