package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestUserFilesDownload: a user's file is in the message event with a
// url_private_download that serves its bytes to the bot token, a sign-in
// page to anyone else (and to a token without files:read), and records
// every download.
func TestUserFilesDownload(t *testing.T) {
	for _, noRead := range []bool{false, true} {
		s := New(Options{NoFilesRead: noRead})
		said := s.Say(UserMessage{Text: s.Mention() + " see", Files: []UserFile{{Name: "a b.txt", MimeType: "text/plain", Content: []byte("hello")}}})
		var cb struct {
			Event struct {
				Subtype string `json:"subtype"`
				Files   []struct {
					Name string `json:"name"`
					Size int    `json:"size"`
					URL  string `json:"url_private_download"`
				} `json:"files"`
			} `json:"event"`
		}
		if err := json.Unmarshal(said.Payloads[1], &cb); err != nil {
			t.Fatal(err)
		}
		if cb.Event.Subtype != "file_share" || len(cb.Event.Files) != 1 || cb.Event.Files[0].Size != 5 {
			t.Fatalf("message event %+v", cb.Event)
		}
		get := func(token string) (string, string) {
			req, _ := http.NewRequest(http.MethodGet, cb.Event.Files[0].URL, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b), resp.Header.Get("Content-Type")
		}
		body, ct := get(s.Options().BotToken)
		if want := !noRead; (body == "hello") != want || (ct == "text/plain") != want {
			t.Fatalf("files:read %v: %q (%s)", !noRead, body, ct)
		}
		if body, _ := get(""); body == "hello" {
			t.Fatal("served the file without a token")
		}
		n := 0
		for _, c := range s.Snapshot().Calls {
			if c.Method == "files.download" {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d downloads recorded", n)
		}
		s.Close()
	}
}
