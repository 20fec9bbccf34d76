package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

const (
	key     = "sk-live-DO-NOT-LEAK-4242/+?&=%"
	keyName = "SANDBOT_MODEL_API_KEY"
)

func newKeyRedactor() *Redactor {
	return New(Secret{Name: keyName, Value: key}, Secret{Name: "SANDBOT_SLACK_BOT_TOKEN", Value: "xoxb-1111-2222-abcdefABCDEF"})
}

// assertScrubbed fails when out still holds any rendering of the key or
// lacks its marker.
func assertScrubbed(t *testing.T, in, out string) {
	t.Helper()
	if !strings.Contains(out, Marker(keyName)) {
		t.Errorf("no marker in %q (input %q)", out, in)
	}
	for _, f := range forms(key) {
		if len(f) >= MinLen && strings.Contains(out, f) {
			t.Errorf("rendering %q survived in %q", f, out)
		}
	}
}

func TestRedactForms(t *testing.T) {
	r := newKeyRedactor()
	b := []byte(key)
	jsonArg, _ := json.Marshal(map[string]string{"command": "curl -H 'Authorization: Bearer " + key + "'"})
	cases := map[string]string{
		"plain":              "the key is " + key + ".",
		"json string":        string(jsonArg),
		"hex lower":          "0x" + hex.EncodeToString(b),
		"hex upper":          strings.ToUpper(hex.EncodeToString(b)),
		"base64 std padded":  base64.StdEncoding.EncodeToString(b),
		"base64 std raw":     base64.RawStdEncoding.EncodeToString(b) + " end",
		"base64 url padded":  base64.URLEncoding.EncodeToString(b),
		"base64 url raw":     base64.RawURLEncoding.EncodeToString(b),
		"query escaped":      "https://x.test/?k=" + url.QueryEscape(key),
		"path escaped":       "https://x.test/" + url.PathEscape(key) + "/y",
		"percent every byte": percentAll(b, "%%%02X"),
		"percent lower":      percentAll(b, "%%%02x"),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			assertScrubbed(t, in, r.Redact(in))
		})
	}
}

// The key inside a longer base64 stream: whatever precedes it, its
// encoding is found at each of the three byte alignments, in both
// alphabets, also when the stream is wrapped into lines.
func TestRedactInsideBase64Stream(t *testing.T) {
	r := newKeyRedactor()
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pre := 0; pre < 6; pre++ {
			for post := 0; post < 4; post++ {
				stream := append(append(bytes.Repeat([]byte{0xfb}, pre), key...), bytes.Repeat([]byte{0xff}, post)...)
				enc := e.EncodeToString(stream)
				out := r.Redact("payload:" + enc)
				if !strings.Contains(out, Marker(keyName)) {
					t.Errorf("pre=%d post=%d: not found in %q", pre, post, enc)
				}
				// Wrapped the way coreutils base64 wraps (every 76
				// characters; here every 10 to force breaks inside it).
				var lines []string
				for i := 0; i < len(enc); i += 10 {
					lines = append(lines, enc[i:min(i+10, len(enc))])
				}
				out = r.Redact("begin\n" + strings.Join(lines, "\n") + "\nend")
				if !strings.Contains(out, Marker(keyName)) {
					t.Errorf("pre=%d post=%d wrapped: not found in %q", pre, post, lines)
				}
			}
		}
	}
}

func TestRedactWrappedHex(t *testing.T) {
	r := newKeyRedactor()
	h := hex.EncodeToString([]byte("prefix" + key + "suffix"))
	in := h[:30] + "\r\n" + h[30:60] + "\n" + h[60:]
	if out := r.Redact(in); !strings.Contains(out, Marker(keyName)) {
		t.Errorf("wrapped hex not found: %q", out)
	}
}

func TestRedactKeepsOtherText(t *testing.T) {
	r := newKeyRedactor()
	for _, in := range []string{"", "hello world", "line one\nline two\n", "abcdefgh\nijklmnop\r\nqrst\n", "c2stbGl2ZQ==", strings.Repeat("A", 10000)} {
		if out := r.Redact(in); out != in {
			t.Errorf("Redact(%q) = %q, want it unchanged", in, out)
		}
	}
}

func TestRedactEveryOccurrenceAndEverySecret(t *testing.T) {
	r := newKeyRedactor()
	tok := "xoxb-1111-2222-abcdefABCDEF"
	in := key + " and " + tok + " and " + key + " and " + base64.StdEncoding.EncodeToString([]byte(tok))
	out := r.Redact(in)
	want := fmt.Sprintf("%s and %s and %s and %s", Marker(keyName), Marker("SANDBOT_SLACK_BOT_TOKEN"), Marker(keyName), Marker("SANDBOT_SLACK_BOT_TOKEN"))
	if out != want {
		t.Errorf("Redact = %q, want %q", out, want)
	}
}

// Secrets shorter than MinLen are not looked for (their renderings would
// hit ordinary text), and the redactor says which ones it skipped.
func TestShortSecretsAreSkipped(t *testing.T) {
	r := New(Secret{Name: "SHORT", Value: "abc1234"}, Secret{Name: "EMPTY"}, Secret{Name: "OK", Value: "abcd1234"})
	if got := r.Skipped(); len(got) != 1 || got[0] != "SHORT" {
		t.Errorf("Skipped = %v, want [SHORT]", got)
	}
	if got := r.Names(); len(got) != 1 || got[0] != "OK" {
		t.Errorf("Names = %v, want [OK]", got)
	}
	if out := r.Redact("abc1234 abcd1234"); out != "abc1234 "+Marker("OK") {
		t.Errorf("Redact = %q", out)
	}
}

func TestNilAndEmptyRedactors(t *testing.T) {
	var r *Redactor
	if r.Redact(key) != key || New().Redact(key) != key {
		t.Error("a redactor without secrets must change nothing")
	}
}

func TestURLSecrets(t *testing.T) {
	got := URLSecrets("SANDBOT_SANDBOX_SNAPSHOT_URL", "s3://AKIAEXAMPLE:wJalrXUtnFEMI%2FK7MDENG@bucket/p?region=eu-west-1&secret_access_key=abcdefgh12345678&session_token=tok-0123456789")
	var vals []string
	for _, s := range got {
		if s.Name != "SANDBOT_SANDBOX_SNAPSHOT_URL" {
			t.Errorf("name %q", s.Name)
		}
		vals = append(vals, s.Value)
	}
	want := "abcdefgh12345678,tok-0123456789,wJalrXUtnFEMI/K7MDENG"
	if strings.Join(vals, ",") != want {
		t.Errorf("URLSecrets = %v, want %s", vals, want)
	}
	if s := URLSecrets("X", "file:///var/lib/sandbot/snapshots"); len(s) != 0 {
		t.Errorf("file URL has secrets %v", s)
	}
}

// BenchmarkRedact measures scrubbing a 1 MiB exec output (the Exec
// activity's whole output budget) with the worker's usual five secrets.
func BenchmarkRedact(b *testing.B) {
	r := New(
		Secret{"SANDBOT_MODEL_API_KEY", "sk-proj-" + strings.Repeat("a1B2c3D4", 20)},
		Secret{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"},
		Secret{"SANDBOT_SLACK_APP_TOKEN", "xapp-1-A0123456789-1234567890123-" + strings.Repeat("f0", 32)},
		Secret{"SANDBOT_SLACK_SIGNING_SECRET", strings.Repeat("0a1b2c3d", 4)},
		Secret{"SANDBOT_DISCORD_TOKEN", "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB"},
	)
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString("drwxr-xr-x  2 root root 4096 Dec  1 19:56 some-directory-name\n")
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = r.Redact(in)
	}
}

func TestRedactAroundScrubsPiecesAtCuts(t *testing.T) {
	r := newKeyRedactor()
	const cut = "\n[... cut ...]\n"
	for k := MinPartial; k < len(key); k++ {
		in := "start " + key[:k] + cut + key[len(key)-k:] + " end"
		out := r.RedactAround(in, cut)
		want := "start " + Marker(keyName) + cut + Marker(keyName) + " end"
		if out != want {
			t.Errorf("k=%d: RedactAround(%q) = %q, want %q", k, in, out, want)
		}
	}
	// Whole secrets and text without cuts are handled as by Redact; text
	// beside a cut that is no piece of a secret stays.
	if got := r.RedactAround("a "+key+" b", cut); got != "a "+Marker(keyName)+" b" {
		t.Errorf("whole secret: %q", got)
	}
	if got := r.RedactAround("plain text"+cut+"more text", cut); got != "plain text"+cut+"more text" {
		t.Errorf("clean text changed: %q", got)
	}
	// A base64 rendering cut in two.
	b64 := base64.StdEncoding.EncodeToString([]byte(key))
	in := "x" + b64[:20] + cut + b64[20:] + "y"
	if out := r.RedactAround(in, cut); strings.Contains(out, b64[:20]) || strings.Contains(out, b64[20:]) {
		t.Errorf("cut base64 survived: %q", out)
	}
}

// The replacer runs only on texts that hold the head of a needle; a
// redactor without that filter (seen nil) must scrub every text the same.
func TestHeadFilterChangesNothing(t *testing.T) {
	r := New(
		Secret{Name: keyName, Value: key},
		Secret{Name: "SANDBOT_SLACK_BOT_TOKEN", Value: "xoxb-1111-2222-abcdefABCDEF"},
		Secret{Name: "SHORTISH", Value: "12345678"},
	)
	plain := *r
	plain.seen = nil
	var pieces []string
	for _, n := range r.needles {
		pieces = append(pieces, n.text, n.text[:len(n.text)-1], n.text[1:], n.text[:MinLen], n.text[:MinLen-1])
		// Wrapped over lines, as base64 and xxd -p wrap.
		var lines []string
		for i := 0; i < len(n.text); i += 5 {
			lines = append(lines, n.text[i:min(i+5, len(n.text))])
		}
		pieces = append(pieces, strings.Join(lines, "\n"))
	}
	pieces = append(pieces, "", "\n", "x", "$ true\n", "ordinary text ", "QUJD", "\r\n", "éü", "\xff")
	rnd := uint64(1)
	next := func(n int) int {
		rnd ^= rnd << 13
		rnd ^= rnd >> 7
		rnd ^= rnd << 17
		return int(rnd % uint64(n))
	}
	for i := 0; i < 20000; i++ {
		var sb strings.Builder
		for k := next(6); k >= 0; k-- {
			sb.WriteString(pieces[next(len(pieces))])
		}
		in := sb.String()
		if got, want := r.Redact(in), plain.Redact(in); got != want {
			t.Fatalf("Redact(%q) = %q with the head filter, %q without", in, got, want)
		}
	}
	for _, n := range r.needles {
		if !r.mayHold("..." + n.text + "...") {
			t.Errorf("the filter misses needle %q", n.text)
		}
	}
	if r.mayHold(strings.Repeat("drwxr-xr-x  2 root root 4096 Dec  1 19:56 name\n", 100)) {
		t.Log("the filter let an ordinary listing through (a false positive; harmless, but unlikely)")
	}
}

// BenchmarkRedactTranscript measures scrubbing the messages of a long
// session's transcript, as the model activity does at every call: many
// short texts, none holding a secret.
func BenchmarkRedactTranscript(b *testing.B) {
	r := newKeyRedactor()
	var msgs []string
	for i := 0; i < 550; i++ {
		msgs = append(msgs, []string{`{"commands":["true"]}`, "$ true\n(exit 0, no output)", "go"}[i%3])
	}
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range msgs {
			_ = r.Redact(m)
		}
	}
}
