package fakeslack

import (
	"net/http"
	neturl "net/url"
	"strings"
	"time"
)

// UserFile is a file a user attaches to a message (UserMessage.Files).
// Slack describes it in the message and app_mention events with a
// url_private_download that only a token with files:read may fetch.
type UserFile struct {
	Name     string
	MimeType string // default application/octet-stream
	Content  []byte
	// URL, when set, replaces the download URL in the events (an attacker's
	// descriptor, for tests of what the worker refuses).
	URL string
}

// sayFilesLocked stores a message's files as uploaded files of the user
// and returns their event JSON.
func (s *Server) sayFilesLocked(m UserMessage) []any {
	if len(m.Files) == 0 {
		return nil
	}
	out := make([]any, 0, len(m.Files))
	for _, uf := range m.Files {
		id := s.newIDLocked("F")
		mt := uf.MimeType
		if mt == "" {
			mt = "application/octet-stream"
		}
		s.files[id] = &File{ID: id, Name: uf.Name, Title: uf.Name, Length: len(uf.Content), Content: append([]byte(nil), uf.Content...),
			Uploaded: true, Channel: m.Channel, ThreadTS: m.ThreadTS, Shared: true, User: m.User, MimeType: mt}
		url := s.srv.URL + "/files-pri/" + s.opts.TeamID + "-" + id + "/download/" + neturl.PathEscape(uf.Name)
		if uf.URL != "" {
			url = uf.URL
		}
		out = append(out, map[string]any{
			"id": id, "name": uf.Name, "title": uf.Name, "mimetype": mt, "filetype": "binary", "size": len(uf.Content),
			"user": m.User, "mode": "hosted", "is_external": false,
			"url_private": s.srv.URL + "/files-pri/" + s.opts.TeamID + "-" + id + "/" + neturl.PathEscape(uf.Name), "url_private_download": url,
		})
	}
	return out
}

// serveDownload serves url_private_download: the file to a bearer token
// that may read files (the bot token), and — as Slack does — a sign-in
// page to anyone else. Every request is recorded as a "files.download"
// call.
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request) {
	tf := r.PathValue("file")
	id := tf[strings.LastIndexByte(tf, '-')+1:]
	auth := r.Header.Get("Authorization")
	s.mu.Lock()
	f := s.files[id]
	ok := auth == "Bearer "+s.opts.BotToken && !s.opts.NoFilesRead
	call := Call{Seq: s.nextSeqLocked(), Method: "files.download", At: time.Now(), Status: http.StatusOK}
	call.Form = map[string][]string{"file": {id}, "authorized": {map[bool]string{true: "yes", false: "no"}[ok]}}
	if f == nil {
		call.Status = http.StatusNotFound
	}
	s.calls = append(s.calls, call)
	var data []byte
	if f != nil {
		data = append([]byte(nil), f.Content...)
	}
	s.notifyLocked()
	s.mu.Unlock()
	switch {
	case f == nil:
		http.NotFound(w, r)
	case !ok:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!DOCTYPE html><html><body>Sign in to Slack</body></html>"))
	default:
		w.Header().Set("Content-Type", f.MimeType)
		_, _ = w.Write(data)
	}
}
