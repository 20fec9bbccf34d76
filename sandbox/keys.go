package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Snapshot keys are laid out per session so that destroying a session can
// delete everything it wrote with one prefix, and a fork gets its own copy
// under its own prefix:
//
//	sessions/<escaped session id>/turn-000012.tar
//
// The functions are pure, so workflow code may call them.

// SessionPrefix is the store prefix under which all of a session's
// snapshots live. It ends with "/", so one session's prefix never matches
// another session whose ID merely starts the same way.
func SessionPrefix(sessionID string) string {
	return SessionsPrefix + escapeKeySegment(sessionID) + "/"
}

// SessionsPrefix is the store prefix under which every session's prefix
// lies.
const SessionsPrefix = "sessions/"

// SessionOfPrefix is the inverse of SessionPrefix: the session ID a
// session prefix was made from, or an error for a key SessionPrefix could
// not have made.
func SessionOfPrefix(prefix string) (string, error) {
	seg, ok := strings.CutPrefix(prefix, SessionsPrefix)
	if !ok || !strings.HasSuffix(seg, "/") {
		return "", fmt.Errorf("%w: %q is not a session prefix (want e.g. %q)", ErrBadKey, prefix, SessionPrefix("session"))
	}
	seg = strings.TrimSuffix(seg, "/")
	if seg == "%00" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(seg) {
			return "", fmt.Errorf("%w: %q ends inside an escape", ErrBadKey, prefix)
		}
		v, err := strconv.ParseUint(seg[i+1:i+3], 16, 8)
		if err != nil || strings.ToUpper(seg[i+1:i+3]) != seg[i+1:i+3] {
			return "", fmt.Errorf("%w: %q has a bad escape %q", ErrBadKey, prefix, seg[i:i+3])
		}
		b.WriteByte(byte(v))
		i += 2
	}
	id := b.String()
	if SessionPrefix(id) != prefix {
		return "", fmt.Errorf("%w: %q is not how session %q is written", ErrBadKey, prefix, id)
	}
	return id, nil
}

// SnapshotKey is the store key of a session's snapshot taken after turn.
func SnapshotKey(sessionID string, turn int) string {
	return fmt.Sprintf("%sturn-%06d.tar", SessionPrefix(sessionID), turn)
}

// escapeKeySegment makes s safe as one path segment of a store key on any
// blob backend: letters, digits and "_-:." are kept (a leading "." is
// escaped, so "." and ".." cannot form), everything else is %XX. The
// mapping is injective because "%" itself is always escaped.
func escapeKeySegment(s string) string {
	if s == "" {
		return "%00"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		keep := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == ':' || (c == '.' && i > 0)
		if keep {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// ErrSnapshotNotFound is returned (wrapped) by snapshot stores for a key
// that does not exist.
var ErrSnapshotNotFound = errors.New("snapshot not found")

// ErrBadKey is returned (wrapped) for a store key that is empty, absolute,
// or has empty, "." or ".." segments.
var ErrBadKey = errors.New("bad snapshot key")

// CheckKey reports whether key is a well-formed store key: relative,
// "/"-separated, without empty, "." or ".." segments.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty (want e.g. %q)", ErrBadKey, SnapshotKey("session", 1))
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q has an empty, \".\" or \"..\" segment (want e.g. %q)",
				ErrBadKey, key, SnapshotKey("session", 1))
		}
	}
	return nil
}

// CheckPrefix is CheckKey for a listing prefix, which must end with "/".
func CheckPrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%w: prefix %q must end with \"/\"", ErrBadKey, prefix)
	}
	return CheckKey(strings.TrimSuffix(prefix, "/"))
}

// RepoBaseKey is where a session keeps the snapshot of its freshly cloned
// repository: the base of every /diff, kept for the session's life.
func RepoBaseKey(sessionID string) string {
	return SessionPrefix(sessionID) + "repo-base.tar"
}
