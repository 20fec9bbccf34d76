package fakediscord

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// UserFile is a file a user attaches to a message (UserMessageWithFiles).
type UserFile struct {
	Name        string
	ContentType string
	Data        []byte
	// URL, when set, replaces the attachment's URL on the wire (an
	// attacker's descriptor, for tests of what the worker refuses).
	URL string
}

// UserMessageWithFiles is UserMessage with attachments: MESSAGE_CREATE
// carries each with a url the fake serves without credentials, as
// Discord's CDN serves its signed URLs (GET /attachments/…, counted by
// Downloads).
func (s *Server) UserMessageWithFiles(channelID string, from Member, content string, files []UserFile) (Message, error) {
	s.mu.Lock()
	c, ok := s.channels[channelID]
	if !ok {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("fake discord: unknown channel %s", channelID)
	}
	m := &Message{ID: s.newID(), ChannelID: c.ID, GuildID: c.GuildID, Author: from.User, Content: content, Created: time.Now()}
	if c.GuildID != "" {
		mem := from
		m.Member = &mem
	}
	for _, sm := range mentionRE.FindAllStringSubmatch(content, -1) {
		if sm[1] == s.opts.AppID {
			m.Mentions = append(m.Mentions, s.BotUser())
		} else {
			m.Mentions = append(m.Mentions, User{ID: sm[1], Username: "user" + sm[1]})
		}
	}
	for _, f := range files {
		a := Attachment{ID: s.newID(), Filename: f.Name, ContentType: f.ContentType, Data: append([]byte(nil), f.Data...), URL: f.URL}
		if a.URL == "" {
			a.URL = s.srv.URL + "/attachments/" + c.ID + "/" + a.ID + "/" + url.PathEscape(f.Name) + "?ex=0&is=0&hm=fake"
		}
		m.Attachments = append(m.Attachments, a)
	}
	out, dispatch := s.postLocked(m, c)
	s.mu.Unlock()
	dispatch()
	return out, nil
}

// Downloads counts the attachment downloads the fake served.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// serveAttachment is the CDN: a user's attachment by channel and ID.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	ch, id := r.PathValue("channel"), r.PathValue("id")
	s.mu.Lock()
	var data []byte
	var ct string
	found := false
	for _, m := range s.messages {
		if m.ChannelID != ch {
			continue
		}
		for _, a := range m.Attachments {
			if a.ID == id {
				data, ct, found = append([]byte(nil), a.Data...), a.ContentType, true
			}
		}
	}
	if found {
		s.downloads++
	}
	s.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	_, _ = w.Write(data)
}
