package fakediscord

import (
	"encoding/json"
	"net/http"
)

// gatewayURL is the websocket URL the fake advertises. It uses the Host the
// client sent, which the rewriting transport sets to the fake's address.
func gatewayURL(r *http.Request) string { return "ws://" + r.Host + "/gw" }

func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request, _ *request) {
	writeJSON(w, http.StatusOK, map[string]any{"url": gatewayURL(r)})
}

func (s *Server) handleGatewayBot(w http.ResponseWriter, r *http.Request, _ *request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"url": gatewayURL(r), "shards": 1,
		"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
	})
}

func (s *Server) handleMe(w http.ResponseWriter, _ *http.Request, _ *request) {
	writeJSON(w, http.StatusOK, s.BotUser().wire())
}

// handlePutCommands is the bulk overwrite of global or guild commands: the
// body replaces every command of that scope.
func (s *Server) handlePutCommands(w http.ResponseWriter, r *http.Request, req *request) {
	if r.PathValue("app") != s.opts.AppID {
		writeError(w, http.StatusForbidden, 50001, "Missing Access", nil)
		return
	}
	var raws []json.RawMessage
	var cmds []command
	if err := json.Unmarshal(req.JSON, &raws); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	if err := json.Unmarshal(req.JSON, &cmds); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	fe := formErrors{}
	checkCommands(cmds, fe)
	if fe.write(w) {
		return
	}
	guild := r.PathValue("guild")
	s.mu.Lock()
	if guild != "" {
		if _, ok := s.guilds[guild]; !ok {
			s.mu.Unlock()
			writeError(w, http.StatusForbidden, 50001, "Missing Access", nil)
			return
		}
	}
	out := make([]json.RawMessage, len(raws))
	for i, raw := range raws {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["id"] = s.newID()
		m["application_id"] = s.opts.AppID
		m["version"] = s.newID()
		if guild != "" {
			m["guild_id"] = guild
		}
		if _, ok := m["type"]; !ok {
			m["type"] = 1
		}
		b, _ := json.Marshal(m)
		out[i] = b
	}
	s.commands[scopeKey(guild)] = out
	s.bump()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetCommands(w http.ResponseWriter, r *http.Request, _ *request) {
	out := s.Commands(r.PathValue("guild"))
	if out == nil {
		out = []json.RawMessage{}
	}
	writeJSON(w, http.StatusOK, out)
}
