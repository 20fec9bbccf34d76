package fakedaytona

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

// Exit codes of the file scripts, mapped to statuses.
const (
	exitMissing = 44
	exitIsDir   = 45
)

// The file endpoints run these in the sandbox, as the sandbox user, so they
// see (and are refused) exactly what commands see.
const (
	writeScript = `mkdir -p -- "$(dirname -- "$1")" && cat >"$1"`
	readScript  = `[ -d "$1" ] && exit 45; [ -f "$1" ] || exit 44; exec cat -- "$1"`
	listScript  = `[ -e "$1" ] || exit 44; [ -d "$1" ] || exit 45; cd "$1" && for f in * .*; do
	case "$f" in .|..) continue;; esac
	[ -e "$f" ] || [ -L "$f" ] || continue
	stat -c '%F|%s|%a|%U|%G|%Y|%n' -- "$f"
done`
	deleteScript = `[ -e "$1" ] || [ -L "$1" ] || exit 44; if [ "$2" = true ]; then rm -rf -- "$1"; else [ -d "$1" ] && exit 45; rm -f -- "$1"; fi`
	folderScript = `mkdir -p -m "$2" -- "$1"`
)

func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, b *box, op string) {
	p := r.URL.Query().Get("path")
	needPath := func() bool {
		if !path.IsAbs(p) {
			s.fail(w, r, true, http.StatusBadRequest, "path must be absolute")
			return false
		}
		return true
	}
	switch {
	case op == "/bulk-upload" && r.Method == http.MethodPost:
		s.bulkUpload(w, r, b)
	case op == "/upload" && r.Method == http.MethodPost:
		if needPath() {
			s.upload(w, r, b, p)
		}
	case op == "/download" && r.Method == http.MethodGet:
		if needPath() {
			s.download(w, r, b, p)
		}
	case op == "" && r.Method == http.MethodGet:
		if needPath() {
			s.listDir(w, r, b, p)
		}
	case op == "" && r.Method == http.MethodDelete:
		if needPath() {
			s.runFile(w, r, b, http.StatusNoContent, deleteScript, p, r.URL.Query().Get("recursive"))
		}
	case op == "/folder" && r.Method == http.MethodPost:
		mode := r.URL.Query().Get("mode")
		if mode == "" {
			mode = "755"
		}
		if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
			s.fail(w, r, true, http.StatusBadRequest, "invalid mode")
			return
		}
		if needPath() {
			s.runFile(w, r, b, http.StatusCreated, folderScript, p, mode)
		}
	default:
		s.fail(w, r, true, http.StatusNotFound, "route not found")
	}
}

// runFile runs a file script and answers ok, 404 or 400 by its exit code.
func (s *Server) runFile(w http.ResponseWriter, r *http.Request, b *box, ok int, script string, args ...string) {
	out, err := s.command(b, "", nil, script, args...).CombinedOutput()
	if err != nil {
		s.fileError(w, r, err, args[0], string(out))
		return
	}
	w.WriteHeader(ok)
}

func (s *Server) fileError(w http.ResponseWriter, r *http.Request, err error, p, out string) {
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == exitMissing:
		s.fail(w, r, true, http.StatusNotFound, fmt.Sprintf("file not found: %s", p))
	case errors.As(err, &ee) && ee.ExitCode() == exitIsDir:
		s.fail(w, r, true, http.StatusBadRequest, fmt.Sprintf("%s is a directory", p))
	default:
		s.fail(w, r, true, http.StatusBadRequest, strings.TrimSpace(fmt.Sprintf("%v: %s", err, out)))
	}
}

// writeFile streams r into the sandbox file p and returns its size.
func (s *Server) writeFile(b *box, p string, r io.Reader) (int64, error) {
	cr := &countReader{r: r}
	cmd := s.command(b, "", nil, writeScript, p)
	cmd.Stdin = cr
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return cr.n, fmt.Errorf("write %s: %v: %s", p, err, strings.TrimSpace(errb.String()))
	}
	return cr.n, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bulkUpload is POST /files/bulk-upload: for each i the text part
// files[i].path must come before the part files[i].file; a file part
// without its path aborts with a bare 400, as the daemon does.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, b *box) {
	mr, err := r.MultipartReader()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	paths := map[string]string{}
	type result struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	files := []result{}
	var errs []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		name := part.FormName()
		idx, field, ok := strings.Cut(strings.TrimPrefix(name, "files["), "].")
		if !ok || !strings.HasPrefix(name, "files[") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch field {
		case "path":
			v, _ := io.ReadAll(io.LimitReader(part, 4096))
			paths[idx] = string(v)
		case "file":
			p, seen := paths[idx]
			if !seen || !path.IsAbs(p) {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			n, err := s.writeFile(b, p, part)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			files = append(files, result{p, n})
		default:
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, b *box, p string) {
	mr, err := r.MultipartReader()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if part.FormName() != "file" {
			continue
		}
		if _, err := s.writeFile(b, p, part); err != nil {
			s.fail(w, r, true, http.StatusBadRequest, err.Error())
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
}

// download streams a sandbox file; the status waits for the first bytes
// (or the script's end), so a missing file is a 404, not a cut stream.
func (s *Server) download(w http.ResponseWriter, r *http.Request, b *box, p string) {
	cmd := s.command(b, "", nil, readScript, p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.fail(w, r, true, http.StatusInternalServerError, err.Error())
		return
	}
	if err := cmd.Start(); err != nil {
		s.fail(w, r, true, http.StatusInternalServerError, err.Error())
		return
	}
	br := bufio.NewReaderSize(out, 256<<10)
	_, peekErr := br.Peek(1)
	if peekErr != nil {
		_, _ = io.Copy(io.Discard, br)
		if err := cmd.Wait(); err != nil {
			s.fileError(w, r, err, p, "")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, br)
	_ = cmd.Wait()
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request, b *box, p string) {
	out, err := s.command(b, "", nil, listScript, p).Output()
	if err != nil {
		s.fileError(w, r, err, p, "")
		return
	}
	infos := []map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 7)
		if len(f) < 7 {
			continue
		}
		size, _ := strconv.ParseInt(f[1], 10, 64)
		mode, _ := strconv.ParseUint(f[2], 8, 32)
		mt, _ := strconv.ParseInt(f[5], 10, 64)
		t := time.Unix(mt, 0).UTC().Format(time.RFC3339)
		infos = append(infos, map[string]any{
			"name": f[6], "isDir": f[0] == "directory", "size": size, "mode": fmt.Sprintf("%o", mode),
			"permissions": "0" + f[2], "owner": f[3], "group": f[4], "modTime": t, "modifiedAt": t,
		})
	}
	writeJSON(w, http.StatusOK, infos)
}
