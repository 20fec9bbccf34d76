package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// viewsOpenLocked serves views.open (JSON body, Bearer token): the trigger
// must be known, unused and (with TriggerTTL) fresh, and the modal valid.
func (s *Server) viewsOpenLocked(req request, now time.Time) result {
	var in struct {
		TriggerID string          `json:"trigger_id"`
		View      json.RawMessage `json:"view"`
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		return errResult("invalid_json")
	}
	issued, known := s.trigs[in.TriggerID]
	if !known {
		return errResult("invalid_trigger_id")
	}
	if s.opts.TriggerTTL > 0 && now.Sub(issued) > s.opts.TriggerTTL {
		return errResult("expired_trigger_id")
	}
	delete(s.trigs, in.TriggerID) // one view per trigger
	v, inputs, errs := checkView(in.View)
	if len(errs) > 0 {
		return errResultWith("invalid_arguments", errs)
	}
	id := s.newIDLocked("V")
	s.views[id] = &openedView{
		View:   View{ID: id, TriggerID: in.TriggerID, CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata, Raw: in.View},
		inputs: inputs,
	}
	return okResult(map[string]any{"view": s.viewJSONLocked(s.views[id])})
}

// viewMeta is what the fake keeps of a view's JSON.
type viewMeta struct {
	Type  string `json:"type"`
	Title struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"title"`
	CallbackID      string          `json:"callback_id"`
	PrivateMetadata string          `json:"private_metadata"`
	Blocks          json.RawMessage `json:"blocks"`
}

// checkView applies Slack's modal limits to a view (views.open, .push and
// .update) and returns its input blocks.
func checkView(raw json.RawMessage) (viewMeta, []viewInput, []string) {
	var v viewMeta
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, nil, []string{"view must be a JSON object: " + err.Error()}
	}
	var errs []string
	if v.Type != "modal" {
		errs = append(errs, "view type must be modal")
	}
	if v.Title.Type != "plain_text" || v.Title.Text == "" || TextLen(v.Title.Text) > 24 {
		errs = append(errs, "title must be plain_text of 1-24 characters")
	}
	if TextLen(v.PrivateMetadata) > 3000 {
		errs = append(errs, "private_metadata must be at most 3000 characters")
	}
	if TextLen(v.CallbackID) > 255 {
		errs = append(errs, "callback_id must be at most 255 characters")
	}
	inputs, berrs := validateViewBlocks(v.Blocks)
	return v, inputs, append(errs, berrs...)
}

// Views returns the modals opened so far.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]View, 0, len(s.views))
	for _, v := range s.views {
		out = append(out, v.View)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) uploadURLLocked(req request) result {
	name := req.form.Get("filename")
	n, err := strconv.Atoi(req.form.Get("length"))
	if name == "" || err != nil || n <= 0 {
		return errResult("invalid_arguments")
	}
	id := s.newIDLocked("F")
	s.files[id] = &File{ID: id, Name: name, Length: n}
	return okResult(map[string]any{"upload_url": s.srv.URL + "/upload/" + id, "file_id": id})
}

// serveUpload is the upload URL of files upload v2: a multipart POST of the
// file's bytes, answered with plain text as Slack's file servers do.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("file")
	var content []byte
	f, _, err := r.FormFile("file")
	if err == nil {
		content, err = io.ReadAll(f)
		_ = f.Close()
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	file := s.files[id]
	call := Call{Seq: s.nextSeqLocked(), Method: "upload", Form: url.Values{"file_id": {id}}, Status: 200, At: now}
	switch {
	case r.Method != http.MethodPost:
		call.Status, call.Error = http.StatusMethodNotAllowed, "method_not_allowed"
	case file == nil:
		call.Status, call.Error = http.StatusNotFound, "file_not_found"
	case err != nil:
		call.Status, call.Error = http.StatusBadRequest, "invalid_multipart"
	default:
		file.Content = content
		file.Uploaded = true
	}
	s.calls = append(s.calls, call)
	s.notifyLocked()
	w.WriteHeader(call.Status)
	if call.Status == http.StatusOK {
		_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(content)))
	} else {
		_, _ = io.WriteString(w, call.Error)
	}
}

func (s *Server) completeUploadLocked(req request, now time.Time) result {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(req.form.Get("files")), &files); err != nil || len(files) == 0 {
		return errResult("invalid_arguments")
	}
	ch, thread := req.form.Get("channel_id"), req.form.Get("thread_ts")
	if thread != "" && ch == "" {
		return errResult("invalid_arguments")
	}
	out := make([]any, 0, len(files))
	var ids []string
	for _, f := range files {
		file := s.files[f.ID]
		if file == nil || !file.Uploaded {
			return errResult("file_not_found")
		}
		if file.Length != len(file.Content) {
			return errResult("file_upload_size_mismatch")
		}
		file.Title, file.Channel, file.ThreadTS, file.Comment, file.Shared = f.Title, ch, thread, req.form.Get("initial_comment"), ch != ""
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
		ids = append(ids, f.ID)
	}
	if ch != "" {
		s.addMessageLocked(&Message{
			Channel: ch, TS: s.newTSLocked(), ThreadTS: thread, User: s.opts.BotUserID, BotID: s.opts.BotID,
			SubType: "file_share", Text: req.form.Get("initial_comment"), Files: ids, Updated: now,
		})
	}
	return okResult(map[string]any{"files": out})
}

// serveResponseURL records posts to a response_url (slash commands,
// shortcuts, interactions).
func (s *Server) serveResponseURL(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	s.hooks = append(s.hooks, Hook{ID: r.PathValue("id"), Body: body, At: time.Now()})
	s.notifyLocked()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
}
