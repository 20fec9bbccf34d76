package fakeopenai_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
)

// TestImagePartsAreRecorded: go-openai's content arrays arrive with their
// text joined and their image parts decoded; a malformed image part is a
// 400, as OpenAI answers it.
func TestImagePartsAreRecorded(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	c := newClient(t, f, "")
	f.Push(fakeopenai.FinalStep("a cat"))
	img := []byte("\x89PNG\r\n\x1a\nbytes")
	_, err := c.CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{
		Role: "user", MultiContent: []goopenai.ChatMessagePart{
			{Type: goopenai.ChatMessagePartTypeText, Text: "what is this?"},
			{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: "data:image/png;base64,iVBORw0KGgpieXRlcw==", Detail: goopenai.ImageURLDetailAuto}},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	m := r.Body.Messages[0]
	if m.Content != "what is this?" || len(m.Images) != 1 || m.Images[0].MimeType != "image/png" || !bytes.Equal(m.Images[0].Data, img) {
		t.Fatalf("recorded %+v", m)
	}

	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,eA=="}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`,
		`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"audio"}]}]}`,
	} {
		resp, err := http.Post(f.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
}
