package sandbox

import (
	"errors"
	"fmt"
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
	return "sessions/" + escapeKeySegment(sessionID) + "/"
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
