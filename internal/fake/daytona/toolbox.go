package fakedaytona

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// outputLimit bounds what the fake keeps of one command's output; the
// real daemon keeps all of it, but a fake must not grow without bound.
const outputLimit = 8 << 20

type session struct {
	id   string
	cmds map[string]*sessCmd
}

type sessCmd struct {
	id, command string
	cmd         *exec.Cmd
	log         *logBuf
	done        chan struct{}
	exit        int // valid once done is closed
}

// logBuf is a command's log as the daemon keeps it: chunks labelled with
// their stream, in arrival order.
type logBuf struct {
	mu     sync.Mutex
	chunks []chunk
	size   int
}

type chunk struct {
	stderr bool
	p      []byte
}

type streamWriter struct {
	l      *logBuf
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if room := outputLimit - w.l.size; room > 0 {
		k := min(room, len(p))
		w.l.chunks = append(w.l.chunks, chunk{w.stderr, bytes.Clone(p[:k])})
		w.l.size += k
	}
	return len(p), nil
}

// render returns the combined output, stdout, stderr and the raw
// multiplexed log with \x01\x01\x01 / \x02\x02\x02 line prefixes.
func (l *logBuf) render() (combined, stdout, stderr, muxed string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c, o, e, m strings.Builder
	for _, ch := range l.chunks {
		c.Write(ch.p)
		prefix := "\x01\x01\x01"
		if ch.stderr {
			e.Write(ch.p)
			prefix = "\x02\x02\x02"
		} else {
			o.Write(ch.p)
		}
		for _, line := range strings.SplitAfter(string(ch.p), "\n") {
			if line != "" {
				m.WriteString(prefix + line)
			}
		}
	}
	return c.String(), o.String(), e.String(), m.String()
}

// splitOutput reports whether a request gets stdout and stderr apart: an
// X-Daytona-SDK-Version of at least 0.167.0.
func splitOutput(r *http.Request) bool {
	v := strings.TrimPrefix(r.Header.Get("X-Daytona-SDK-Version"), "v")
	if v == "" {
		return false
	}
	var n [3]int
	for i, f := range strings.SplitN(strings.SplitN(v, "-", 2)[0], ".", 3) {
		n[i], _ = strconv.Atoi(f)
	}
	return n[0] > 0 || n[1] >= 167
}

func (s *Server) serveToolbox(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/toolbox/")
	id, op, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	b := s.boxes[id]
	state := ""
	if b != nil {
		state = b.state
	}
	s.mu.Unlock()
	if b == nil {
		s.fail(w, r, true, http.StatusNotFound, "sandbox not found")
		return
	}
	if state != "started" {
		s.fail(w, r, true, http.StatusConflict, "sandbox is not started (state "+state+")")
		return
	}
	parts := strings.Split(op, "/")
	switch {
	case op == "process/execute" && r.Method == http.MethodPost:
		s.execute(w, r, b)
	case op == "process/session" && r.Method == http.MethodPost:
		s.createSession(w, r, b)
	case len(parts) == 3 && parts[1] == "session" && r.Method == http.MethodDelete:
		s.deleteSession(w, r, b, parts[2])
	case len(parts) == 4 && parts[1] == "session" && parts[3] == "exec" && r.Method == http.MethodPost:
		s.sessionExec(w, r, b, parts[2])
	case len(parts) == 5 && parts[1] == "session" && parts[3] == "command" && r.Method == http.MethodGet:
		s.commandStatus(w, r, b, parts[2], parts[4], false)
	case len(parts) == 6 && parts[1] == "session" && parts[3] == "command" && parts[5] == "logs" && r.Method == http.MethodGet:
		s.commandStatus(w, r, b, parts[2], parts[4], true)
	case strings.HasPrefix(op, "files"):
		s.serveFiles(w, r, b, strings.TrimPrefix(op, "files"))
	default:
		s.fail(w, r, true, http.StatusNotFound, "route not found")
	}
}

// execute is POST /process/execute: the command is written to a shell's
// stdin, stdout and stderr share one buffer, and a positive timeout kills
// the process group and answers 408 without output.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, b *box) {
	var req struct {
		Command *string           `json:"command"`
		Cwd     *string           `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout *int              `json:"timeout"`
	}
	if !s.decodeStrict(w, r, true, &req) {
		return
	}
	if req.Command == nil || *req.Command == "" {
		s.fail(w, r, true, http.StatusBadRequest, "command is required")
		return
	}
	cwd := ""
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	cmd := s.command(b, cwd, req.Envs, "exec /bin/sh")
	cmd.Stdin = strings.NewReader(*req.Command)
	var out logBuf
	cmd.Stdout, cmd.Stderr = streamWriter{l: &out}, streamWriter{l: &out}
	if err := cmd.Start(); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": -1, "result": err.Error()})
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout != nil && *req.Timeout > 0 {
		t := time.NewTimer(time.Duration(*req.Timeout) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-done:
		combined, _, _, _ := out.render()
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": exitCode(err, cmd), "result": combined})
	case <-timeout:
		killGroup(cmd)
		<-done
		s.fail(w, r, true, http.StatusRequestTimeout, "request timeout: command execution timeout")
	case <-r.Context().Done():
		killGroup(cmd)
		<-done
	}
}

func exitCode(err error, cmd *exec.Cmd) int {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, b *box) {
	var req struct {
		SessionID *string `json:"sessionId"`
	}
	if !s.decodeStrict(w, r, true, &req) {
		return
	}
	if req.SessionID == nil || *req.SessionID == "" {
		s.fail(w, r, true, http.StatusBadRequest, "sessionId is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.sessions[*req.SessionID] != nil {
		s.fail(w, r, true, http.StatusConflict, "session already exists")
		return
	}
	b.sessions[*req.SessionID] = &session{id: *req.SessionID, cmds: map[string]*sessCmd{}}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) session(b *box, sid string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return b.sessions[sid]
}

// deleteSession kills the process group of every running command of the
// session (what the daemon's SIGTERM-then-SIGKILL comes to) and forgets it.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, b *box, sid string) {
	s.mu.Lock()
	sess := b.sessions[sid]
	delete(b.sessions, sid)
	s.mu.Unlock()
	if sess == nil {
		s.fail(w, r, true, http.StatusNotFound, "session not found")
		return
	}
	for _, c := range sess.cmds {
		select {
		case <-c.done:
		default:
			killGroup(c.cmd)
			<-c.done
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, b *box, sid string) {
	var req struct {
		Command           *string `json:"command"`
		RunAsync          *bool   `json:"runAsync"`
		Async             *bool   `json:"async"`
		SuppressInputEcho *bool   `json:"suppressInputEcho"`
	}
	if !s.decodeStrict(w, r, true, &req) {
		return
	}
	if req.Command == nil || *req.Command == "" {
		s.fail(w, r, true, http.StatusBadRequest, "command is required")
		return
	}
	sess := s.session(b, sid)
	if sess == nil {
		s.fail(w, r, true, http.StatusNotFound, "session not found")
		return
	}
	async := (req.RunAsync != nil && *req.RunAsync) || (req.Async != nil && *req.Async)
	c := &sessCmd{id: fmt.Sprintf("cmd-%s", randomID()), command: *req.Command, log: &logBuf{}, done: make(chan struct{})}
	c.cmd = s.command(b, "", nil, *req.Command)
	c.cmd.Stdout, c.cmd.Stderr = streamWriter{l: c.log}, streamWriter{l: c.log, stderr: true}
	if err := c.cmd.Start(); err != nil {
		s.fail(w, r, true, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	sess.cmds[c.id] = c
	s.mu.Unlock()
	go func() {
		err := c.cmd.Wait()
		c.exit = exitCode(err, c.cmd)
		close(c.done)
	}()
	if async {
		writeJSON(w, http.StatusAccepted, map[string]string{"cmdId": c.id})
		return
	}
	select {
	case <-c.done:
	case <-r.Context().Done():
		return
	}
	combined, stdout, stderr, _ := c.log.render()
	resp := map[string]any{"cmdId": c.id, "output": combined, "exitCode": c.exit}
	if splitOutput(r) {
		resp["stdout"], resp["stderr"] = stdout, stderr
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) commandStatus(w http.ResponseWriter, r *http.Request, b *box, sid, cid string, logs bool) {
	sess := s.session(b, sid)
	var c *sessCmd
	if sess != nil {
		s.mu.Lock()
		c = sess.cmds[cid]
		s.mu.Unlock()
	}
	if c == nil {
		s.fail(w, r, true, http.StatusNotFound, "command not found")
		return
	}
	if !logs {
		resp := map[string]any{"id": c.id, "command": c.command}
		select {
		case <-c.done:
			resp["exitCode"] = c.exit
		default:
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	combined, stdout, stderr, muxed := c.log.render()
	switch {
	case splitOutput(r):
		writeJSON(w, http.StatusOK, map[string]string{"output": combined, "stdout": stdout, "stderr": stderr})
	case r.Header.Get("X-Daytona-Split-Output") == "true":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(muxed))
	default:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(combined))
	}
}

var idMu sync.Mutex
var idSeq int

func randomID() string {
	idMu.Lock()
	defer idMu.Unlock()
	idSeq++
	return fmt.Sprintf("%d-%d", time.Now().UnixNano()%1e9, idSeq)
}
