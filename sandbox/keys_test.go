package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestSnapshotKeys(t *testing.T) {
	for _, tc := range []struct{ session, want string }{
		{"slack:T1:C1:1700000000.0001", "sessions/slack:T1:C1:1700000000.0001/turn-000012.tar"},
		{"a/b", "sessions/a%2Fb/turn-000012.tar"},
		{"..", "sessions/%2E./turn-000012.tar"},
		{".hidden", "sessions/%2Ehidden/turn-000012.tar"},
		{"100%", "sessions/100%25/turn-000012.tar"},
		{"", "sessions/%00/turn-000012.tar"},
		{"ü", "sessions/%C3%BC/turn-000012.tar"},
	} {
		got := SnapshotKey(tc.session, 12)
		if got != tc.want {
			t.Errorf("SnapshotKey(%q) = %q, want %q", tc.session, got, tc.want)
		}
		if err := CheckKey(got); err != nil {
			t.Errorf("SnapshotKey(%q) fails CheckKey: %v", tc.session, err)
		}
		if !strings.HasPrefix(got, SessionPrefix(tc.session)) {
			t.Errorf("key %q is not under its session prefix", got)
		}
	}
	// Distinct sessions never share or nest prefixes.
	ids := []string{"a", "a/b", "a%2Fb", "ab", "a.b", "a:b", "A"}
	seen := map[string]string{}
	for _, id := range ids {
		p := SessionPrefix(id)
		if other, dup := seen[p]; dup {
			t.Errorf("sessions %q and %q share prefix %q", id, other, p)
		}
		seen[p] = id
		for _, o := range ids {
			if o != id && strings.HasPrefix(SessionPrefix(o), p) {
				t.Errorf("prefix of %q contains session %q", id, o)
			}
		}
	}
}

func TestCheckKey(t *testing.T) {
	for _, ok := range []string{"sessions/x/turn-000001.tar", "a", "a/b.c"} {
		if err := CheckKey(ok); err != nil {
			t.Errorf("CheckKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "a/../b", "./a", ".."} {
		if err := CheckKey(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrBadKey", bad, err)
		}
	}
	if err := CheckPrefix("sessions/x/"); err != nil {
		t.Errorf("CheckPrefix: %v", err)
	}
	for _, bad := range []string{"sessions/x", "/", ""} {
		if err := CheckPrefix(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("CheckPrefix(%q) = %v, want ErrBadKey", bad, err)
		}
	}
}

func TestCheckArchiveName(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "a/b/": "a/b", "./a": "a", ".": ".", "./": ".", "a//b": "a/b", "a/./b": "a/b", "..a/b..": "..a/b..",
	} {
		if got, err := CheckArchiveName(in); err != nil || got != want {
			t.Errorf("CheckArchiveName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/etc/passwd", "..", "../a", "a/../../b", "a/..", `a\..\b`, "a\x00b"} {
		if _, err := CheckArchiveName(bad); !errors.Is(err, ErrUnsafeArchive) {
			t.Errorf("CheckArchiveName(%q) = %v, want ErrUnsafeArchive", bad, err)
		}
	}
	if _, err := CheckHardlinkTarget("x", "."); !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("hard link to the root accepted: %v", err)
	}
}

func TestBackendsGetListsServed(t *testing.T) {
	var bs Backends
	if _, err := bs.Get("local"); !errors.Is(err, ErrUnknownBackend) || !strings.Contains(err.Error(), "serves none") {
		t.Errorf("empty registry: %v", err)
	}
	if _, err := NewBackends(nil); err == nil {
		t.Error("NewBackends accepted nil")
	}
}

func TestSessionOfPrefixInvertsSessionPrefix(t *testing.T) {
	for _, id := range []string{"slack:T1:C1:1700000000.0001", "a/b", "..", ".hidden", "100%", "", "ünï ☃", "x\x00y"} {
		got, err := SessionOfPrefix(SessionPrefix(id))
		if err != nil || got != id {
			t.Errorf("SessionOfPrefix(SessionPrefix(%q)) = %q, %v", id, got, err)
		}
	}
	for _, bad := range []string{"sessions/", "other/x/", "sessions/x", "sessions/a%2/", "sessions/a%zz/", "sessions/a%2f/", "sessions/a b/"} {
		if id, err := SessionOfPrefix(bad); err == nil {
			t.Errorf("SessionOfPrefix(%q) = %q, want an error", bad, id)
		}
	}
}
