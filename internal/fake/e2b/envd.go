package fakee2b

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// routeSandbox finds the sandbox a request to the proxy is for: the
// E2b-Sandbox-Id header (with E2b-Sandbox-Port), else a "49983-<id>."
// host prefix (a legacy "-<clientID>" suffix on the label is allowed).
func routeSandbox(r *http.Request) (id string, portOK bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return id, r.Header.Get("E2b-Sandbox-Port") == EnvdPort
	}
	label, _, _ := strings.Cut(r.Host, ".")
	port, rest, ok := strings.Cut(label, "-")
	if !ok {
		return "", false
	}
	id, _, _ = strings.Cut(rest, "-")
	return id, port == EnvdPort
}

// serveEnvd routes to the sandbox and checks its state and token, then
// serves envd's endpoints.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request) {
	id, portOK := routeSandbox(r)
	s.mu.Lock()
	sb := s.sandboxes[id]
	running := sb != nil && sb.state == stateRunning
	s.mu.Unlock()
	if !running || !portOK {
		// Paused sandboxes are not resumed by traffic: autoResume is off.
		proxyNotFound(w, id)
		return
	}
	if r.URL.Path == "/health" && r.Method == http.MethodGet {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if sb.token != "" && r.Header.Get("X-Access-Token") != sb.token {
		apiError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	user, ok := basicUser(r)
	if !ok {
		apiError(w, http.StatusUnauthorized, "invalid username: only \"user\" exists in this sandbox")
		return
	}
	switch {
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		s.handleUpload(w, r, sb, user)
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		s.handleDownload(w, r, sb, user)
	case r.URL.Path == "/process.Process/Start" && r.Method == http.MethodPost:
		s.handleStart(w, r, sb, user)
	case r.URL.Path == "/process.Process/SendSignal" && r.Method == http.MethodPost:
		s.handleSignal(w, r, sb)
	case strings.HasPrefix(r.URL.Path, "/process.") || strings.HasPrefix(r.URL.Path, "/filesystem."):
		connectError(w, http.StatusNotImplemented, "unimplemented", r.URL.Path+" is not implemented by the fake")
	default:
		apiError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	}
}

// basicUser reads the Linux user from Authorization: Basic base64("user:"),
// defaulting to "user" as envd ≥ 0.4.0 does.
func basicUser(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "user", true
	}
	enc, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	u, _, _ := strings.Cut(string(raw), ":")
	return u, u == "user"
}

// resolve makes a sandbox path absolute (relative paths are under the
// user's home) and maps it to the host.
func resolve(sb *sbox, p, user string) (abs, root, rel string, ok bool) {
	if p == "" {
		return "", "", "", false
	}
	if !strings.HasPrefix(p, "/") {
		p = "/home/" + user + "/" + p
	}
	abs = path.Clean(p)
	root, rel, ok = sb.hostRoot(abs)
	return abs, root, rel, ok
}

type entryInfo struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request, sb *sbox, user string) {
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	qpath := r.URL.Query().Get("path")
	var written []entryInfo
	write := func(p string, body io.Reader) bool {
		abs, root, rel, ok := resolve(sb, p, user)
		if !ok {
			apiError(w, http.StatusForbidden, fmt.Sprintf("permission denied: cannot write '%s'", p))
			return false
		}
		if err := writeFile(root, rel, body); err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrExist) || strings.Contains(err.Error(), "escapes") {
				status = http.StatusForbidden
			}
			apiError(w, status, fmt.Sprintf("error writing '%s': %v", abs, err))
			return false
		}
		written = append(written, entryInfo{Name: path.Base(abs), Path: abs, Type: "file"})
		return true
	}
	switch ct {
	case "application/octet-stream":
		if qpath == "" {
			apiError(w, http.StatusBadRequest, "path is required for an octet-stream upload")
			return
		}
		if !write(qpath, r.Body) {
			return
		}
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			apiError(w, http.StatusBadRequest, "error parsing multipart form: "+err.Error())
			return
		}
		_ = params
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				apiError(w, http.StatusBadRequest, "error parsing multipart form: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			p := qpath
			if p == "" {
				p = part.FileName()
			}
			if !write(p, part) {
				return
			}
		}
		if len(written) == 0 {
			apiError(w, http.StatusBadRequest, "no file part in the multipart form")
			return
		}
	default:
		apiError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Type %q", r.Header.Get("Content-Type")))
		return
	}
	writeJSON(w, http.StatusOK, written)
}

// writeFile writes body to rel below root, creating parents owned by the
// sandbox user. os.Root keeps symlinks in the sandbox from leading the
// fake (which may be root) outside it.
func writeFile(root, rel string, body io.Reader) error {
	rt, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer rt.Close()
	dir := path.Dir(rel)
	if dir != "." {
		cur := ""
		for _, seg := range strings.Split(dir, "/") {
			cur = path.Join(cur, seg)
			if err := rt.Mkdir(cur, 0o755); err == nil {
				if os.Geteuid() == 0 {
					_ = rt.Lchown(cur, sandboxUID, sandboxUID)
				}
			} else if !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
	}
	f, err := rt.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		_ = f.Chown(sandboxUID, sandboxUID)
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request, sb *sbox, user string) {
	p := r.URL.Query().Get("path")
	abs, root, rel, ok := resolve(sb, p, user)
	if !ok {
		apiError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
		return
	}
	rt, err := os.OpenRoot(root)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer rt.Close()
	f, err := rt.Open(rel)
	if err != nil {
		apiError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", abs))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if st.IsDir() {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", abs))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(abs)))
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// StartRequest is process.StartRequest in proto3 JSON.
type startRequest struct {
	Process struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args"`
		Envs map[string]string `json:"envs"`
		Cwd  *string           `json:"cwd"`
	} `json:"process"`
	Pty   json.RawMessage `json:"pty"`
	Tag   *string         `json:"tag"`
	Stdin *bool           `json:"stdin"`
}

// maxEnvelope bounds a request envelope.
const maxEnvelope = 4 << 20

// writeEnvelope writes one Connect envelope and flushes it.
func writeEnvelope(w http.ResponseWriter, flag byte, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [5]byte
	hdr[0] = flag
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

func endStreamError(w http.ResponseWriter, code, msg string) {
	_ = writeEnvelope(w, 0x02, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

type event struct {
	stream string
	data   []byte
}

type endEvent struct {
	ExitCode int    `json:"exitCode,omitempty"`
	Exited   bool   `json:"exited,omitempty"`
	Status   string `json:"status,omitempty"`
	Error    string `json:"error,omitempty"`
}

// exitGrace is how long Start keeps the stream open after its process
// exited, for output still in flight from children holding the pipes.
const exitGrace = time.Second

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request, sb *sbox, user string) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/connect+json" {
		connectError(w, http.StatusUnsupportedMediaType, "unknown", fmt.Sprintf("invalid content-type: %q; expecting \"application/connect+json\"", r.Header.Get("Content-Type")))
		return
	}
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		connectError(w, http.StatusBadRequest, "invalid_argument", "cannot read envelope: "+err.Error())
		return
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if hdr[0] != 0 || size > maxEnvelope {
		connectError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf("bad envelope: flags %#x, %d bytes", hdr[0], size))
		return
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(r.Body, payload); err != nil {
		connectError(w, http.StatusBadRequest, "invalid_argument", "cannot read envelope: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/connect+json")
	var req startRequest
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		w.WriteHeader(http.StatusOK)
		endStreamError(w, "invalid_argument", "unmarshal message: "+err.Error())
		return
	}
	s.recordArgs(r, append([]string{req.Process.Cmd}, req.Process.Args...))
	cwd := "/home/" + user
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		cwd = *req.Process.Cwd
	}
	abs, root, rel, ok := resolve(sb, cwd, user)
	if !ok && abs != "" {
		// Outside /home and /tmp a sandbox sees the (read-only) image.
		root, rel, ok = "/", strings.TrimPrefix(abs, "/"), true
	}
	if ok {
		st, err := os.Stat(path.Join(root, rel))
		ok = err == nil && st.IsDir()
	}
	if !ok || req.Process.Cmd == "" {
		w.WriteHeader(http.StatusOK)
		msg := fmt.Sprintf("cwd '%s' does not exist", abs)
		if req.Process.Cmd == "" {
			msg = "process.cmd is required"
		}
		endStreamError(w, "invalid_argument", msg)
		return
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/" + user, "USER=" + user, "LOGNAME=" + user}
	for k, v := range sb.envVars {
		env = append(env, k+"="+v)
	}
	for k, v := range req.Process.Envs {
		env = append(env, k+"="+v)
	}
	var timeout time.Duration
	if v := r.Header.Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			connectError(w, http.StatusBadRequest, "invalid_argument", "invalid Connect-Timeout-Ms "+v)
			return
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	keepalive := 90 * time.Second
	if v := r.Header.Get("Keepalive-Ping-Interval"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			keepalive = time.Duration(n) * time.Second
		}
	}

	p, outR, errR, err := s.startProc(sb, abs, env, append([]string{req.Process.Cmd}, req.Process.Args...))
	if err != nil {
		w.WriteHeader(http.StatusOK)
		endStreamError(w, "internal", err.Error())
		return
	}
	sb.procMu.Lock()
	sb.procs[p.pid] = p
	sb.procMu.Unlock()
	// The process outlives the request: it runs until it ends or is
	// killed, whatever happens to the stream.
	exited := make(chan struct{})
	var exitCode int
	go func() {
		_ = p.cmd.Wait()
		exitCode = p.cmd.ProcessState.ExitCode()
		sb.procMu.Lock()
		delete(sb.procs, p.pid)
		sb.procMu.Unlock()
		close(exited)
	}()
	events := make(chan event, 16)
	detached := make(chan struct{})
	defer close(detached)
	var readers sync.WaitGroup
	for _, pipe := range []struct {
		name string
		r    io.ReadCloser
	}{{"stdout", outR}, {"stderr", errR}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer pipe.r.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := pipe.r.Read(buf)
				if n > 0 {
					select {
					case events <- event{pipe.name, append([]byte(nil), buf[:n]...)}:
					case <-detached: // nobody listens: output is discarded
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()

	w.WriteHeader(http.StatusOK)
	if writeEnvelope(w, 0, map[string]any{"event": map[string]any{"start": map[string]any{"pid": p.pid}}}) != nil {
		return
	}
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	ticker := time.NewTicker(keepalive)
	defer ticker.Stop()
	var grace <-chan time.Time
	exitedC, readersC := exited, readersDone
	sendData := func(ev event) error {
		return writeEnvelope(w, 0, map[string]any{"event": map[string]any{"data": map[string][]byte{ev.stream: ev.data}}})
	}
	finish := func() {
	drain:
		for {
			select {
			case ev := <-events:
				if sendData(ev) != nil {
					return
				}
			default:
				break drain
			}
		}
		end := endEvent{ExitCode: exitCode, Exited: true, Status: fmt.Sprintf("exit status %d", exitCode)}
		if p.signaled.Load() && exitCode > 128 {
			end = endEvent{ExitCode: -1, Status: "signal: " + strings.ToLower(syscall.Signal(exitCode-128).String())}
		}
		if writeEnvelope(w, 0, map[string]any{"event": map[string]any{"end": end}}) != nil {
			return
		}
		_ = writeEnvelope(w, 0x02, map[string]any{})
	}
	for {
		select {
		case ev := <-events:
			if sendData(ev) != nil {
				return
			}
		case <-readersC:
			readersC = nil
			if exitedC == nil {
				finish()
				return
			}
		case <-exitedC:
			exitedC = nil
			if readersC == nil {
				finish()
				return
			}
			g := time.NewTimer(exitGrace)
			defer g.Stop()
			grace = g.C
		case <-grace:
			finish()
			return
		case <-deadline:
			// The deadline is the process's lifetime: envd kills the
			// one process it started, nothing else.
			p.signaled.Store(true)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			endStreamError(w, "deadline_exceeded", "context deadline exceeded")
			return
		case <-ticker.C:
			if writeEnvelope(w, 0, map[string]any{"event": map[string]any{"keepalive": map[string]any{}}}) != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

type signalRequest struct {
	Process struct {
		Pid *int    `json:"pid"`
		Tag *string `json:"tag"`
	} `json:"process"`
	Signal json.RawMessage `json:"signal"`
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request, sb *sbox) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		connectError(w, http.StatusUnsupportedMediaType, "unknown", fmt.Sprintf("invalid content-type: %q; expecting \"application/json\"", r.Header.Get("Content-Type")))
		return
	}
	var req signalRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		connectError(w, http.StatusBadRequest, "invalid_argument", "unmarshal message: "+err.Error())
		return
	}
	var sig syscall.Signal
	var name string
	var num int
	switch {
	case json.Unmarshal(req.Signal, &name) == nil:
		switch name {
		case "SIGNAL_SIGKILL":
			sig = syscall.SIGKILL
		case "SIGNAL_SIGTERM":
			sig = syscall.SIGTERM
		}
	case json.Unmarshal(req.Signal, &num) == nil:
		if num == 9 || num == 15 {
			sig = syscall.Signal(num)
		}
	}
	if sig == 0 {
		connectError(w, http.StatusBadRequest, "invalid_argument", "invalid signal "+string(req.Signal))
		return
	}
	if req.Process.Pid == nil {
		connectError(w, http.StatusBadRequest, "invalid_argument", "process selector is required")
		return
	}
	sb.procMu.Lock()
	p := sb.procs[*req.Process.Pid]
	if p != nil {
		p.signaled.Store(true)
		// Exactly that pid: its children are not envd's business.
		_ = syscall.Kill(p.pid, sig)
	}
	sb.procMu.Unlock()
	if p == nil {
		connectError(w, http.StatusNotFound, "not_found", fmt.Sprintf("process with pid %d not found", *req.Process.Pid))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
