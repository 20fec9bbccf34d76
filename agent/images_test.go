package agent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// imageStore serves images by key.
type imageStore map[string][]byte

func (s imageStore) Open(_ context.Context, key string) (io.ReadCloser, error) {
	b, ok := s[key]
	if !ok {
		return nil, errors.New("no such key")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

var pic = []byte("\x89PNG\r\n\x1a\nfake image bytes")

func withImages(text string, keys ...string) session.Message {
	m := userMsg(text)
	for _, k := range keys {
		m.Images = append(m.Images, session.ImageRef{Key: k, MimeType: "image/png", Path: "attachments/" + k + ".png", Bytes: int64(len(pic))})
	}
	return m
}

// TestVisionSendsImageParts: with Vision on, a user message's images go
// to the model as image_url parts with data: URLs (the fake decodes them);
// the newest MaxImagesPerCall are sent and older ones are named in text.
func TestVisionSendsImageParts(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.Vision = true })
	store := imageStore{}
	var keys []string
	for i := range agent.MaxImagesPerCall + 2 {
		k := string(rune('a' + i))
		store[k] = append(append([]byte(nil), pic...), byte(i))
		keys = append(keys, k)
	}
	a.Images = store
	f.Push(fakeopenai.FinalStep("I see them"))
	msgs := []session.Message{withImages("old", keys[:2]...), {Role: session.RoleAssistant, Content: "ok"}, withImages("look at these", keys[2:]...)}
	if _, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	if r.DecodeError != "" {
		t.Fatal(r.DecodeError)
	}
	old, latest := r.Body.Messages[1], r.Body.Messages[3]
	if len(latest.Images) != agent.MaxImagesPerCall || latest.Content != "look at these" {
		t.Fatalf("latest message: %d images, %q", len(latest.Images), latest.Content)
	}
	if latest.Images[0].MimeType != "image/png" || !bytes.Equal(latest.Images[0].Data, store["c"]) {
		t.Fatalf("first image of the latest message: %+v", latest.Images[0])
	}
	if len(old.Images) != 0 || !strings.Contains(old.Content, "The image attachments/a.png is not shown here") {
		t.Fatalf("older images beyond the cap: %d images, %q", len(old.Images), old.Content)
	}
}

// TestNoVisionNamesTheImages: without Vision the model gets the paths as
// text and no image part, whatever the transcript holds.
func TestNoVisionNamesTheImages(t *testing.T) {
	a, f := newAgent(t, nil)
	a.Images = imageStore{"k": pic}
	f.Push(fakeopenai.FinalStep("ok"))
	if _, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{withImages("see", "k")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	if m := r.Body.Messages[1]; len(m.Images) != 0 || !strings.Contains(m.Content, "attachments/k.png is not shown") {
		t.Fatalf("message %+v", m)
	}
}

// TestImagesCountAgainstTheContextBudget: every image costs ImageTokens in
// the window, so a transcript of images is fitted like one of text and an
// image cannot carry a conversation past the budget.
func TestImagesCountAgainstTheContextBudget(t *testing.T) {
	plain := userMsg("hello")
	img := withImages("hello", "k", "l")
	if d := agent.MessageTokens(img) - agent.MessageTokens(plain); d != 2*agent.ImageTokens {
		t.Fatalf("two images cost %d tokens, want %d", d, 2*agent.ImageTokens)
	}
	var msgs []session.Message
	for range 20 {
		msgs = append(msgs, withImages("look", "k", "l", "m"), session.Message{Role: session.RoleAssistant, Content: "seen"})
	}
	w := agent.Window{ContextTokens: 20 * agent.ImageTokens, AnswerTokens: 1000}
	fitted := agent.Fit(msgs, w)
	if got := agent.TranscriptTokens(fitted); got > w.Available() {
		t.Fatalf("fitted transcript is %d tokens, over the %d available", got, w.Available())
	}
}
