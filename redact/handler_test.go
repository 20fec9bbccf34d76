package redact

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

type leakyStringer struct{}

func (leakyStringer) String() string { return "stringer " + key }

// TestHandlerScrubsEveryPartOfARecord: a secret in the message, a string
// attribute, an error, a Stringer, a struct, a group and an attribute added
// with With never reaches the underlying handler.
func TestHandlerScrubsEveryPartOfARecord(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), newKeyRedactor()))
	log = log.With("url", "https://u:"+key+"@host")
	log.Info("model said "+key,
		"body", base64.StdEncoding.EncodeToString([]byte(key)),
		"error", errors.New("dial "+key),
		"s", leakyStringer{},
		"req", struct{ Auth string }{key},
		slog.Group("g", "inner", key),
		"clean", "stays")
	out := buf.String()
	if strings.Contains(out, key[:12]) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(key))[:16]) {
		t.Fatalf("log line leaks the key: %s", out)
	}
	if n := strings.Count(out, Marker(keyName)); n != 7 {
		t.Errorf("%d markers in %s, want 7", n, out)
	}
	if !strings.Contains(out, "clean=stays") {
		t.Errorf("clean attribute changed: %s", out)
	}
}

func TestHandlerWithoutSecretsIsTheHandler(t *testing.T) {
	h := slog.NewTextHandler(&bytes.Buffer{}, nil)
	if Handler(h, New()) != slog.Handler(h) || Handler(h, nil) != slog.Handler(h) {
		t.Error("a redactor without secrets wrapped the handler")
	}
}
