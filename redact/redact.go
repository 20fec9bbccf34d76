// Package redact replaces known secrets in text before the text leaves the
// worker: tool output, model answers and error messages are scrubbed before
// they enter workflow state, a model request or a chat message.
//
// It is a leaf (standard library only), so any process (the worker today,
// the chat front ends later) can scrub with it without linking the rest of
// sandbot.
//
// Redaction is a second line of defence, not the boundary. The boundary is
// that a sandbox never holds a secret at all (see the trust boundary in the
// design): an agent that already had a secret could always encode it in a
// way no scrubber knows (reversed, XORed, one character per line). What
// redaction catches is the accidental and the common: a secret echoed by an
// error message, printed by a command, repeated by the model, or passed
// through the usual encoders (base64, hex, URL encoding, JSON strings).
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// MinLen is the shortest secret the redactor looks for, in bytes. Shorter
// values are skipped (see Skipped): every base64 or hex rendering of a short
// value is a few characters that occur by chance in ordinary output, so the
// scrubber would mangle text while protecting almost nothing (a secret that
// short can be guessed anyway).
const MinLen = 8

// Secret is one value to scrub and the name its marker shows, usually the
// setting it came from (SANDBOT_MODEL_API_KEY).
type Secret struct {
	Name  string
	Value string
}

// Marker is what replaces an occurrence of the secret called name.
func Marker(name string) string { return "[redacted: " + name + "]" }

// Redactor scrubs a fixed set of secrets. The zero value and a nil
// *Redactor scrub nothing. It is safe for concurrent use.
type Redactor struct {
	repl    *strings.Replacer
	needles []needle // longest first
	skipped []string
	names   []string
	// heads are the needles' first MinLen bytes as little-endian words,
	// sorted, and seen a bit per hash of a head (nil: hand every text to
	// repl). A text none of whose MinLen-byte windows is a head holds no
	// needle, so Redact returns it without running the replacer, whose
	// search of every position costs about 60 ns a byte: the model
	// activity scrubs the whole transcript at every call.
	heads []uint64
	seen  *[headBits / 64]uint64
}

// headBits is the size of Redactor.seen: with a few hundred needles (a
// dozen secrets) a window that is no head hits one in a few hundred, and
// costs a binary search of heads.
const headBits = 1 << 16

// headHash maps a MinLen-byte window to its bit in Redactor.seen.
func headHash(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> (64 - 16) }

// needle is one rendering of a secret and the marker that replaces it.
type needle struct{ text, marker string }

// New builds a redactor for secrets. Empty values are ignored silently;
// values shorter than MinLen are ignored and reported by Skipped.
//
// For each secret it looks for these renderings (each also upper-case where
// the encoding has case-free digits):
//   - the plain value and its JSON string form (tool-call arguments are JSON);
//   - hex, lower and upper case;
//   - standard and URL-safe base64, padded and unpadded, and the part of the
//     base64 that is fixed whatever surrounds the secret, for each of the
//     three byte alignments it can have inside a longer base64 stream (a
//     base64-encoded file, an Authorization header, a protobuf payload);
//   - URL encoding: query escaping, path escaping, and every byte
//     percent-encoded in upper or lower case.
//
// Base64 and hex streams wrapped over several lines (base64 and xxd -p wrap
// their output) are joined before they are searched.
func New(secrets ...Secret) *Redactor {
	var (
		needles []needle
		seen    = map[string]bool{}
		r       = &Redactor{}
	)
	for _, s := range secrets {
		switch {
		case s.Value == "":
			continue
		case len(s.Value) < MinLen:
			r.skipped = append(r.skipped, s.Name)
			continue
		}
		r.names = append(r.names, s.Name)
		m := Marker(s.Name)
		for _, f := range forms(s.Value) {
			// Needles shorter than MinLen (the stable middle of a short
			// secret's base64) would hit by chance.
			if len(f) < MinLen || seen[f] {
				continue
			}
			seen[f] = true
			needles = append(needles, needle{f, m})
		}
	}
	if len(needles) == 0 {
		return r
	}
	// strings.Replacer prefers the earlier of two needles that match at
	// the same position, so longer needles go first: a padded base64 form
	// is replaced whole rather than leaving its padding behind.
	sort.SliceStable(needles, func(i, j int) bool { return len(needles[i].text) > len(needles[j].text) })
	pairs := make([]string, 0, 2*len(needles))
	for _, n := range needles {
		pairs = append(pairs, n.text, n.marker)
	}
	r.repl = strings.NewReplacer(pairs...)
	r.needles = needles
	r.seen = new([headBits / 64]uint64)
	for _, n := range needles {
		w := window(n.text, 0)
		r.heads = append(r.heads, w)
		h := headHash(w)
		r.seen[h/64] |= 1 << (h % 64)
	}
	slices.Sort(r.heads)
	r.heads = slices.Compact(r.heads)
	return r
}

// window reads MinLen bytes into a word: MinLen must stay 8.
const _ = uint(MinLen-8) + uint(8-MinLen)

// window is s[i:i+MinLen] as a little-endian word.
func window(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// mayHold reports whether s may hold a needle: whether some MinLen-byte
// window of s is the head of one (every needle is at least MinLen long).
// False means it holds none.
func (r *Redactor) mayHold(s string) bool {
	if r.seen == nil {
		return true
	}
	if len(s) < MinLen {
		return false
	}
	w := window(s, 0)
	for i := MinLen; ; i++ {
		if h := headHash(w); r.seen[h/64]&(1<<(h%64)) != 0 {
			if _, ok := slices.BinarySearch(r.heads, w); ok {
				return true
			}
		}
		if i == len(s) {
			return false
		}
		w = w>>8 | uint64(s[i])<<56
	}
}

// replace is r.repl.Replace, skipped for a text that holds no needle.
func (r *Redactor) replace(s string) string {
	if !r.mayHold(s) {
		return s
	}
	return r.repl.Replace(s)
}

// MinPartial is the shortest piece of a secret RedactAround scrubs at a
// cut. Shorter pieces match ordinary text by chance too often to be worth
// replacing, and say little about the secret.
const MinPartial = 4

// RedactAround is Redact for a text from which parts were cut out, each cut
// marked by cut (an output cap keeps a stream's start and end and drops its
// middle). A secret the cut fell inside is no longer whole, so Redact
// cannot see it: the piece of it before the cut (a beginning of some
// rendering of the secret, at least MinPartial bytes) and the piece after
// it (an end of one) are replaced by the secret's marker as well.
func (r *Redactor) RedactAround(s, cut string) string {
	s = r.Redact(s)
	if r == nil || r.repl == nil || cut == "" || !strings.Contains(s, cut) {
		return s
	}
	parts := strings.Split(s, cut)
	for i := range parts {
		if i < len(parts)-1 {
			parts[i] = r.scrubEnd(parts[i])
		}
		if i > 0 {
			parts[i] = r.scrubStart(parts[i])
		}
	}
	return strings.Join(parts, cut)
}

// scrubEnd replaces the longest beginning of a needle that p ends with.
func (r *Redactor) scrubEnd(p string) string {
	best, marker := 0, ""
	for _, n := range r.needles {
		for k := min(len(n.text)-1, len(p)); k >= MinPartial && k > best; k-- {
			if strings.HasSuffix(p, n.text[:k]) {
				best, marker = k, n.marker
				break
			}
		}
	}
	if best == 0 {
		return p
	}
	return p[:len(p)-best] + marker
}

// scrubStart replaces the longest end of a needle that p starts with.
func (r *Redactor) scrubStart(p string) string {
	best, marker := 0, ""
	for _, n := range r.needles {
		for k := min(len(n.text)-1, len(p)); k >= MinPartial && k > best; k-- {
			if strings.HasPrefix(p, n.text[len(n.text)-k:]) {
				best, marker = k, n.marker
				break
			}
		}
	}
	if best == 0 {
		return p
	}
	return marker + p[best:]
}

// Skipped names the secrets that were too short to look for.
func (r *Redactor) Skipped() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.skipped...)
}

// Names names the secrets the redactor looks for.
func (r *Redactor) Names() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.names...)
}

// Redact returns s with every known rendering of every secret replaced by
// its Marker.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.repl == nil || s == "" {
		return s
	}
	s = r.replace(s)
	if !strings.Contains(s, "\n") {
		return s
	}
	return r.unwrapped(s)
}

// unwrapped scrubs base64 and hex streams that were wrapped into lines
// (base64 wraps at 76 characters, openssl at 64, xxd -p at 60): a block of
// two or more whole lines made only of base64 characters, all as long as
// the first except the last, is searched joined. When it held a secret the
// block is replaced by its scrubbed, joined form (its line breaks are
// lost, the price of not leaking).
func (r *Redactor) unwrapped(s string) string {
	var (
		out      strings.Builder
		copied   int // s[:copied] is in out
		start    = -1
		end      int // the block is s[start:end], without its last line break
		width, n int
	)
	flush := func() {
		if start >= 0 && n >= 2 {
			block := s[start:end]
			joined := strings.ReplaceAll(strings.ReplaceAll(block, "\r", ""), "\n", "")
			if red := r.replace(joined); red != joined {
				out.WriteString(s[copied:start])
				out.WriteString(red)
				copied = end
			}
		}
		start, n = -1, 0
	}
	for i := 0; i < len(s); {
		lineEnd, next := len(s), len(s)
		if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
			lineEnd, next = i+j, i+j+1
		}
		line := strings.TrimSuffix(s[i:lineEnd], "\r")
		switch {
		case !streamLine(line):
			flush()
		case start >= 0 && len(line) <= width:
			n++
			end = i + len(line)
			if len(line) < width {
				flush() // a shorter line is a stream's last
			}
		default:
			flush()
			start, end, width, n = i, i+len(line), len(line), 1
		}
		i = next
	}
	flush()
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

// streamLine reports whether a line could be part of a wrapped base64 or
// hex stream.
func streamLine(l string) bool {
	if l == "" {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// forms lists the renderings of v that New looks for.
func forms(v string) []string {
	b := []byte(v)
	out := []string{v}
	if j, err := json.Marshal(v); err == nil {
		out = append(out, strings.Trim(string(j), `"`))
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		out = append(out, strings.Trim(strings.TrimSpace(sb.String()), `"`))
	}
	h := hex.EncodeToString(b)
	out = append(out, h, strings.ToUpper(h))
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, e.EncodeToString(b))
		raw := e.WithPadding(base64.NoPadding)
		for k := 0; k < 3; k++ {
			out = append(out, aligned(raw, b, k))
		}
	}
	out = append(out, url.QueryEscape(v), url.PathEscape(v), percentAll(b, "%%%02X"), percentAll(b, "%%%02x"))
	return out
}

// aligned is the part of the base64 of b that does not depend on the
// bytes around it when b starts k bytes (0, 1 or 2) into a 3-byte group of
// a longer stream: it skips the characters that mix in the k bytes before
// and stops before the first character that mixes in the bytes after.
func aligned(e *base64.Encoding, b []byte, k int) string {
	full := e.EncodeToString(append(make([]byte, k), b...))
	start := (8*k + 5) / 6      // first character made only of bits of b
	end := 8 * (k + len(b)) / 6 // characters wholly inside the known bits
	if end <= start {
		return ""
	}
	return full[start:end]
}

// percentAll percent-encodes every byte of b with format (upper or lower
// case hex digits).
func percentAll(b []byte, format string) string {
	var sb strings.Builder
	for _, c := range b {
		fmt.Fprintf(&sb, format, c)
	}
	return sb.String()
}

// URLSecrets returns the secret parts of a URL, such as a snapshot store's
// s3:// or a database URL: the password of its user information and the
// values of query parameters whose names suggest a credential (key, secret,
// token, password, credential, signature). A URL that does not parse has
// none. Each is named name, so its marker says which setting it came from.
func URLSecrets(name, raw string) []Secret {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []Secret
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, Secret{Name: name, Value: p})
	}
	for k, vs := range u.Query() {
		if !credentialParam(k) {
			continue
		}
		for _, v := range vs {
			if v != "" {
				out = append(out, Secret{Name: name, Value: v})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out
}

func credentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "secret", "token", "password", "passwd", "credential", "signature", "sig"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
