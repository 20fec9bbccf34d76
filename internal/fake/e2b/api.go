package fakee2b

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	stateRunning = "running"
	statePaused  = "paused"
	stateKilled  = "killed"
)

// defaultTimeout is the TTL the real API applies when a create omits it.
const defaultTimeout = 15 * time.Second

// maxTimeout is the longest TTL the fake accepts (a Pro team's 24 h).
const maxTimeout = 24 * time.Hour

// sbox is one sandbox. Its fields are guarded by Server.mu, except procs
// (procMu).
type sbox struct {
	id         string
	dir        string
	templateID string
	metadata   map[string]string
	envVars    map[string]string
	autoPause  bool
	state      string
	token      string
	startedAt  time.Time
	endAt      time.Time
	timer      *time.Timer
	timerGen   int

	procMu sync.Mutex
	procs  map[int]*proc
}

func (sb *sbox) info() SandboxInfo {
	md := map[string]string{}
	for k, v := range sb.metadata {
		md[k] = v
	}
	return SandboxInfo{ID: sb.id, TemplateID: sb.templateID, State: sb.state, Metadata: md, AutoPause: sb.autoPause, EndAt: sb.endAt}
}

func (sb *sbox) stopTimer() {
	sb.timerGen++
	if sb.timer != nil {
		sb.timer.Stop()
		sb.timer = nil
	}
}

// setTTLLocked moves the sandbox's end to now+ttl and arms the timer.
func (s *Server) setTTLLocked(sb *sbox, ttl time.Duration) {
	sb.stopTimer()
	sb.endAt = time.Now().Add(ttl)
	if s.opts.ManualExpiry {
		return
	}
	gen := sb.timerGen
	id := sb.id
	sb.timer = time.AfterFunc(ttl, func() { s.expire(id, gen) })
}

// expire pauses or kills a sandbox whose TTL ran out. gen 0 means now,
// whatever the timer; otherwise only if no TTL change happened since.
func (s *Server) expire(id string, gen int) {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb == nil || sb.state != stateRunning || (gen != 0 && gen != sb.timerGen) {
		s.mu.Unlock()
		return
	}
	sb.stopTimer()
	if sb.autoPause {
		sb.state = statePaused
	} else {
		sb.state = stateKilled
		delete(s.sandboxes, id)
	}
	s.notifyLocked()
	s.mu.Unlock()
	sb.killAll()
	if !sb.autoPause {
		os.RemoveAll(sb.dir)
	}
}

// authAPI checks X-API-Key, answering 401 as the real API does.
func (s *Server) authAPI(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("X-API-Key") != s.opts.APIKey {
		apiError(w, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.")
		return false
	}
	return true
}

// decodeBody decodes a strict camelCase JSON body: unknown keys (such as
// snake_case spellings) and a non-JSON content type are a 400. An empty
// body is allowed when optional.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		apiError(w, http.StatusBadRequest, "cannot read body: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(raw)) == 0 && optional {
		return true
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("request body has an error: header Content-Type has unexpected value %q", r.Header.Get("Content-Type")))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		apiError(w, http.StatusBadRequest, "request body has an error: "+err.Error())
		return false
	}
	return true
}

type newSandbox struct {
	TemplateID          *string           `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          json.RawMessage   `json:"autoResume"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             json.RawMessage   `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
	MCP                 json.RawMessage   `json:"mcp"`
}

type sandboxJSON struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken,omitempty"`
	Domain          *string `json:"domain"`
}

func sandboxBody(sb *sbox) sandboxJSON {
	return sandboxJSON{TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "6532622b", EnvdVersion: EnvdVersion, EnvdAccessToken: sb.token}
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	var body newSandbox
	if !decodeBody(w, r, &body, false) {
		return
	}
	if body.TemplateID == nil || *body.TemplateID == "" {
		apiError(w, http.StatusBadRequest, "request body has an error: doesn't match schema: property \"templateID\" is missing")
		return
	}
	ttl := defaultTimeout
	if body.Timeout != nil {
		if *body.Timeout <= 0 {
			apiError(w, http.StatusBadRequest, "Timeout must be greater than 0")
			return
		}
		ttl = time.Duration(*body.Timeout) * time.Second
		if ttl > maxTimeout {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(maxTimeout.Hours())))
			return
		}
	}
	if *body.TemplateID != "base" {
		apiError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", *body.TemplateID))
		return
	}
	sb := &sbox{
		id:         newID(),
		templateID: *body.TemplateID,
		metadata:   body.Metadata,
		envVars:    body.EnvVars,
		autoPause:  body.AutoPause,
		state:      stateRunning,
		startedAt:  time.Now(),
		procs:      map[int]*proc{},
	}
	if body.Secure {
		sb.token = newToken()
	}
	sb.dir = filepath.Join(s.dir, sb.id)
	if err := os.Mkdir(sb.dir, 0o755); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := sb.makeDirs(); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	s.sandboxes[sb.id] = sb
	s.setTTLLocked(sb, ttl)
	out := sandboxBody(sb)
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

// lookup finds a live sandbox, answering 404 when there is none.
func (s *Server) lookupLocked(w http.ResponseWriter, id string) *sbox {
	sb := s.sandboxes[id]
	if sb == nil {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox \"%s\" doesn't exist or you don't have access to it", id))
		return nil
	}
	return sb
}

type detailJSON struct {
	TemplateID      string            `json:"templateID"`
	SandboxID       string            `json:"sandboxID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	State           string            `json:"state"`
	Lifecycle       map[string]any    `json:"lifecycle"`
}

func detailBody(sb *sbox) detailJSON {
	onTimeout := "kill"
	if sb.autoPause {
		onTimeout = "pause"
	}
	return detailJSON{
		TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "6532622b",
		StartedAt: sb.startedAt.UTC(), EndAt: sb.endAt.UTC(), EnvdVersion: EnvdVersion,
		EnvdAccessToken: sb.token, CPUCount: 2, MemoryMB: 512, DiskSizeMB: 10240,
		Metadata: sb.metadata, State: sb.state,
		Lifecycle: map[string]any{"autoResume": false, "onTimeout": onTimeout},
	}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	s.mu.Lock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	var out detailJSON
	if sb != nil {
		out = detailBody(sb)
	}
	s.mu.Unlock()
	if sb != nil {
		writeJSON(w, http.StatusOK, out)
	}
}

// handleList serves GET /v2/sandboxes: state=running,paused;
// metadata=url-encoded k=v&k2=v2 (all must match); limit (≤100);
// nextToken (the last ID of the previous page).
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	q := r.URL.Query()
	states := map[string]bool{stateRunning: true, statePaused: true}
	if v := q.Get("state"); v != "" {
		states = map[string]bool{}
		for _, st := range strings.Split(v, ",") {
			if st != stateRunning && st != statePaused {
				apiError(w, http.StatusBadRequest, "invalid state "+st)
				return
			}
			states[st] = true
		}
	}
	var want url.Values
	if v := q.Get("metadata"); v != "" {
		var err error
		if want, err = url.ParseQuery(v); err != nil {
			apiError(w, http.StatusBadRequest, "error when parsing metadata: "+err.Error())
			return
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apiError(w, http.StatusBadRequest, "limit must be between 1 and 100")
			return
		}
		limit = n
	}
	next := q.Get("nextToken")
	s.mu.Lock()
	var all []detailJSON
	running := 0
	for _, sb := range s.sandboxes {
		if sb.state == stateRunning {
			running++
		}
		if !states[sb.state] {
			continue
		}
		ok := true
		for k, vs := range want {
			if sb.metadata[k] != vs[0] {
				ok = false
			}
		}
		if ok {
			d := detailBody(sb)
			d.EnvdAccessToken = "" // listings carry no token
			all = append(all, d)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].SandboxID < all[j].SandboxID })
	page := []detailJSON{}
	for _, d := range all {
		if next != "" && d.SandboxID <= next {
			continue
		}
		if len(page) == limit {
			w.Header().Set("X-Next-Token", page[len(page)-1].SandboxID)
			break
		}
		page = append(page, d)
	}
	w.Header().Set("X-Total-Running", strconv.Itoa(running))
	writeJSON(w, http.StatusOK, page)
}

type timeoutBody struct {
	Timeout *int64 `json:"timeout"`
}

func (b timeoutBody) ttl(w http.ResponseWriter) (time.Duration, bool) {
	if b.Timeout == nil {
		apiError(w, http.StatusBadRequest, "request body has an error: doesn't match schema: property \"timeout\" is missing")
		return 0, false
	}
	if *b.Timeout < 0 {
		apiError(w, http.StatusBadRequest, "Timeout must be greater than or equal to 0")
		return 0, false
	}
	d := time.Duration(*b.Timeout) * time.Second
	if d > maxTimeout {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(maxTimeout.Hours())))
		return 0, false
	}
	return d, true
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	var body timeoutBody
	if !decodeBody(w, r, &body, false) {
		return
	}
	ttl, ok := body.ttl(w)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[r.PathValue("id")]
	if sb == nil || sb.state != stateRunning {
		// The real API only finds running sandboxes here.
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox '%s' is not running", r.PathValue("id")))
		return
	}
	s.setTTLLocked(sb, ttl)
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRefreshes(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	var body struct {
		Duration *int64 `json:"duration"`
	}
	if !decodeBody(w, r, &body, true) {
		return
	}
	d := defaultTimeout
	if body.Duration != nil {
		if *body.Duration < 0 || *body.Duration > 3600 {
			apiError(w, http.StatusBadRequest, "duration must be between 0 and 3600 seconds")
			return
		}
		d = time.Duration(*body.Duration) * time.Second
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[r.PathValue("id")]
	if sb == nil || sb.state != stateRunning {
		apiError(w, http.StatusNotFound, fmt.Sprintf("Sandbox '%s' is not running", r.PathValue("id")))
		return
	}
	if end := time.Now().Add(d); end.After(sb.endAt) {
		s.setTTLLocked(sb, d)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	var body struct {
		Memory *bool `json:"memory"`
	}
	if !decodeBody(w, r, &body, true) {
		return
	}
	s.mu.Lock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		s.mu.Unlock()
		return
	}
	if sb.state == statePaused {
		s.mu.Unlock()
		apiError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' is already paused", sb.id))
		return
	}
	sb.state = statePaused
	sb.stopTimer()
	s.notifyLocked()
	s.mu.Unlock()
	sb.killAll()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	var body timeoutBody
	if !decodeBody(w, r, &body, false) {
		return
	}
	ttl, ok := body.ttl(w)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		return
	}
	status := http.StatusOK
	if sb.state == statePaused {
		sb.state = stateRunning
		status = http.StatusCreated
		s.setTTLLocked(sb, ttl)
	} else if end := time.Now().Add(ttl); end.After(sb.endAt) {
		// Connecting to a running sandbox only ever extends its TTL.
		s.setTTLLocked(sb, ttl)
	}
	s.notifyLocked()
	writeJSON(w, status, sandboxBody(sb))
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	if !s.authAPI(w, r) {
		return
	}
	s.mu.Lock()
	sb := s.lookupLocked(w, r.PathValue("id"))
	if sb == nil {
		s.mu.Unlock()
		return
	}
	delete(s.sandboxes, sb.id)
	sb.state = stateKilled
	sb.stopTimer()
	s.notifyLocked()
	s.mu.Unlock()
	sb.killAll()
	os.RemoveAll(sb.dir)
	w.WriteHeader(http.StatusNoContent)
}
