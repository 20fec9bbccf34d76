package fakedaytona

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// box is one sandbox. Its fields are guarded by Server.mu.
type box struct {
	s                *Server
	seq              int
	id, name         string
	state, desired   string
	next             string // state a transition ends in
	ticks            int    // control-plane requests until it does
	labels, env      map[string]string
	snapshot         string
	autoStop         *int
	autoArchive      *int
	autoDelete       *int
	created, updated time.Time
	dir              string
	sessions         map[string]*session
}

func (b *box) info() SandboxInfo {
	return SandboxInfo{ID: b.id, Name: b.name, State: b.state, Labels: maps.Clone(b.labels), AutoStopInterval: b.autoStop, Dir: b.dir}
}

func transitional(state string) bool {
	switch state {
	case "creating", "starting", "stopping", "pausing", "restoring", "archiving", "destroying", "resuming":
		return true
	}
	return false
}

// transitionLocked moves b into mid, to end up in final after
// TransitionTicks further requests naming it.
func (s *Server) transitionLocked(b *box, mid, final string) {
	b.updated = time.Now().UTC()
	b.desired = final
	if s.opts.TransitionTicks < 0 {
		b.state = final
		return
	}
	b.state, b.next, b.ticks = mid, final, s.opts.TransitionTicks
}

func (s *Server) tickLocked(b *box) {
	if b.ticks > 0 {
		b.ticks--
		if b.ticks == 0 {
			b.state = b.next
			b.updated = time.Now().UTC()
		}
	}
}

func (s *Server) dtoLocked(b *box) map[string]any {
	d := map[string]any{
		"id": b.id, "name": b.name, "organizationId": "org-fake", "snapshot": b.snapshot, "user": "daytona",
		"env": b.env, "labels": b.labels, "public": false, "networkBlockAll": false, "target": "us",
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": b.state, "desiredState": b.desired,
		"toolboxProxyUrl": s.srv.URL + "/toolbox", "createdAt": b.created.Format(time.RFC3339Nano),
		"updatedAt": b.updated.Format(time.RFC3339Nano), "recoverable": false,
	}
	for k, v := range map[string]*int{"autoStopInterval": b.autoStop, "autoArchiveInterval": b.autoArchive, "autoDeleteInterval": b.autoDelete} {
		if v != nil {
			d[k] = *v
		}
	}
	return d
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeStrict decodes a JSON body, answering 400 for a wrong content type,
// bad JSON or a key the DTO does not have.
func (s *Server) decodeStrict(w http.ResponseWriter, r *http.Request, toolbox bool, v any) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.fail(w, r, toolbox, http.StatusBadRequest, fmt.Sprintf("unsupported content type %q, want application/json", ct))
		return false
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if k, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			msg = "property " + strings.Trim(k, `"`) + " should not exist"
		}
		s.fail(w, r, toolbox, http.StatusBadRequest, msg)
		return false
	}
	return true
}

type createBody struct {
	Name                *string           `json:"name"`
	Snapshot            *string           `json:"snapshot"`
	User                *string           `json:"user"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              *bool             `json:"public"`
	NetworkBlockAll     *bool             `json:"networkBlockAll"`
	NetworkAllowList    *string           `json:"networkAllowList"`
	DomainAllowList     []string          `json:"domainAllowList"`
	Target              *string           `json:"target"`
	CPU                 *int              `json:"cpu"`
	GPU                 *int              `json:"gpu"`
	Memory              *int              `json:"memory"`
	Disk                *int              `json:"disk"`
	GPUType             []string          `json:"gpuType"`
	AutoStopInterval    *int              `json:"autoStopInterval"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval"`
	Volumes             []any             `json:"volumes"`
	BuildInfo           *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`
	LinkedSandbox *string `json:"linkedSandbox"`
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, _ []byte) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if parts[0] != "sandbox" {
		s.fail(w, r, false, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodPost:
		s.create(w, r)
		return
	case len(parts) == 1 && r.Method == http.MethodGet:
		s.list(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookupLocked(parts[1])
	if b == nil {
		s.fail(w, r, false, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", parts[1]))
		return
	}
	s.tickLocked(b)
	op := strings.Join(parts[2:], "/")
	switch {
	case op == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.dtoLocked(b))
	case op == "" && r.Method == http.MethodDelete:
		if transitional(b.state) {
			s.fail(w, r, false, http.StatusConflict, "Sandbox state change in progress")
			return
		}
		b.state, b.desired = "destroying", "destroyed"
		dto := s.dtoLocked(b)
		delete(s.boxes, b.id)
		b.killAll()
		_ = os.RemoveAll(b.dir)
		writeJSON(w, http.StatusOK, dto)
	case op == "start" && r.Method == http.MethodPost:
		switch {
		case transitional(b.state):
			s.fail(w, r, false, http.StatusConflict, "Sandbox state change in progress")
		case b.state == "started":
			writeJSON(w, http.StatusOK, s.dtoLocked(b))
		case b.state == "stopped" || b.state == "paused":
			s.transitionLocked(b, "starting", "started")
			writeJSON(w, http.StatusOK, s.dtoLocked(b))
		case b.state == "archived":
			s.transitionLocked(b, "restoring", "started")
			writeJSON(w, http.StatusOK, s.dtoLocked(b))
		default:
			s.fail(w, r, false, http.StatusBadRequest, "Sandbox is in state "+b.state)
		}
	case (op == "stop" || op == "pause") && r.Method == http.MethodPost:
		switch {
		case transitional(b.state):
			s.fail(w, r, false, http.StatusConflict, "Sandbox state change in progress")
		case b.state != "started":
			s.fail(w, r, false, http.StatusBadRequest, "Sandbox is not started")
		default:
			if op == "stop" {
				s.transitionLocked(b, "stopping", "stopped")
			} else {
				s.transitionLocked(b, "pausing", "paused")
			}
			b.sessions = map[string]*session{}
			b.killAll()
			writeJSON(w, http.StatusOK, s.dtoLocked(b))
		}
	case strings.HasPrefix(op, "autostop/") && r.Method == http.MethodPost:
		n, err := strconv.Atoi(strings.TrimPrefix(op, "autostop/"))
		if err != nil || n < 0 {
			s.fail(w, r, false, http.StatusBadRequest, "interval must be a non-negative integer")
			return
		}
		b.autoStop = &n
		w.WriteHeader(http.StatusOK)
	case op == "toolbox-proxy-url" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"url": s.srv.URL + "/toolbox"})
	default:
		s.fail(w, r, false, http.StatusNotFound, "Cannot "+r.Method+" "+r.URL.Path)
	}
}

// lookupLocked finds a sandbox by id or name.
func (s *Server) lookupLocked(idOrName string) *box {
	if b := s.boxes[idOrName]; b != nil {
		return b
	}
	for _, b := range s.boxes {
		if b.name == idOrName {
			return b
		}
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createBody
	if !s.decodeStrict(w, r, false, &req) {
		return
	}
	if (req.CPU != nil || req.GPU != nil || req.Memory != nil || req.Disk != nil) && req.BuildInfo == nil {
		s.fail(w, r, false, http.StatusBadRequest, "Cannot specify Sandbox resources when using a snapshot")
		return
	}
	if req.Snapshot != nil && req.BuildInfo != nil {
		s.fail(w, r, false, http.StatusBadRequest, "Cannot specify both snapshot and buildInfo")
		return
	}
	if req.BuildInfo != nil && !strings.HasPrefix(strings.TrimSpace(req.BuildInfo.DockerfileContent), "FROM ") {
		s.fail(w, r, false, http.StatusBadRequest, "buildInfo.dockerfileContent must start with FROM")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	// Ids are unique across fakes too: processes are found by the id in
	// their environment, and fakes in parallel test binaries share a host.
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := fmt.Sprintf("%08x-fa4e-4000-8000-%x", s.seq, rnd)
	name := id
	if req.Name != nil && *req.Name != "" {
		name = *req.Name
	}
	if s.lookupLocked(name) != nil {
		s.fail(w, r, false, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", name))
		return
	}
	b := &box{
		s: s, seq: s.seq, id: id, name: name, labels: req.Labels, env: req.Env,
		autoStop: req.AutoStopInterval, autoArchive: req.AutoArchiveInterval, autoDelete: req.AutoDeleteInterval,
		created: time.Now().UTC(), dir: s.boxDir(id), sessions: map[string]*session{},
	}
	if b.labels == nil {
		b.labels = map[string]string{}
	}
	if b.env == nil {
		b.env = map[string]string{}
	}
	if req.Snapshot != nil {
		b.snapshot = *req.Snapshot
	} else if req.BuildInfo == nil {
		b.snapshot = "daytonaio/sandbox:0.4.3"
	}
	for _, d := range []string{filepath.Join(b.dir, "home", "daytona"), filepath.Join(b.dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			s.fail(w, r, false, http.StatusInternalServerError, err.Error())
			return
		}
	}
	_ = os.Chmod(filepath.Join(b.dir, "tmp"), 0o1777)
	s.boxes[id] = b
	s.transitionLocked(b, "creating", "started")
	writeJSON(w, http.StatusOK, s.dtoLocked(b))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			s.fail(w, r, false, http.StatusBadRequest, "labels must be a JSON object of strings")
			return
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 200 {
			s.fail(w, r, false, http.StatusBadRequest, "limit must be between 1 and 200")
			return
		}
		limit = n
	}
	after := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			s.fail(w, r, false, http.StatusBadRequest, "invalid cursor")
			return
		}
		after = n
	}
	var states []string
	if st := q.Get("states"); st != "" {
		states = strings.Split(st, ",")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*box
	for _, b := range s.boxes {
		if b.seq <= after || (states != nil && !slices.Contains(states, b.state)) {
			continue
		}
		ok := true
		for k, v := range want {
			if b.labels[k] != v {
				ok = false
			}
		}
		if ok {
			match = append(match, b)
		}
	}
	slices.SortFunc(match, func(a, b *box) int { return a.seq - b.seq })
	items := []map[string]any{}
	var next any
	for i, b := range match {
		if i == limit {
			next = strconv.Itoa(match[i-1].seq)
			break
		}
		items = append(items, s.dtoLocked(b))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}
