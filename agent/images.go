package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"

	"github.com/sandbot/sandbot/session"
	openai "github.com/sashabaranov/go-openai"
)

// Images attached to user messages reach a vision model as image parts
// (Config.Vision, SANDBOT_MODEL_VISION): the workflow's transcript holds
// only a reference (session.ImageRef) to bytes the worker stored when it
// saved the attachment, so no image enters Temporal history, and this
// activity loads them into data: URLs for the one request.

// ImageTokens is what one image counts against the context window. Vision
// models charge by tiles, up to about 1,100 tokens for a large image at
// high detail; the estimate errs high, as every estimate here does.
const ImageTokens = 1500

// MaxImagesPerCall bounds the images one model call sends: the newest
// win, and older ones are named in a note (the files stay in the
// workspace).
const MaxImagesPerCall = 8

// maxImageBytes bounds one image read from the store, whatever it holds.
const maxImageBytes = 20 << 20

// ImageStore reads stored attachment images (the snapshot store).
type ImageStore interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// addImages turns the image references of the transcript's user messages
// (wire[i+offset] is msgs[i]) into image parts, the newest
// MaxImagesPerCall of them; every other one, and every one that cannot be
// read or when vision is off, becomes a line of text naming the file.
func (a *Activities) addImages(ctx context.Context, wire []openai.ChatCompletionMessage, msgs []session.Message, offset int) {
	budget := MaxImagesPerCall
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if len(m.Images) == 0 || m.Role != session.RoleUser {
			continue
		}
		w := &wire[i+offset]
		parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: w.Content}}
		var notes string
		for _, img := range m.Images {
			url := ""
			if a.cfg.Vision && a.Images != nil && budget > 0 {
				var err error
				if url, err = a.dataURL(ctx, img); err != nil {
					slog.Warn("agent: attached image unreadable; the model is told its path instead", "path", img.Path, "error", err)
				}
			}
			if url == "" {
				notes += fmt.Sprintf("\n[The image %s is not shown here; it is in the workspace.]", img.Path)
				continue
			}
			budget--
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: url, Detail: openai.ImageURLDetailAuto}})
		}
		parts[0].Text += notes
		if len(parts) == 1 {
			w.Content = parts[0].Text
			continue
		}
		w.Content, w.MultiContent = "", parts
	}
}

func (a *Activities) dataURL(ctx context.Context, img session.ImageRef) (string, error) {
	rc, err := a.Images.Open(ctx, img.Key)
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(io.LimitReader(rc, maxImageBytes+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxImageBytes {
		return "", fmt.Errorf("image %s is over %d bytes", img.Path, maxImageBytes)
	}
	return "data:" + img.MimeType + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}
