package agent_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandbot/sandbot/agent"
)

func FuzzCapToolResult(f *testing.F) {
	f.Add("hello", 3)
	f.Add(strings.Repeat("日本語", 100), 50)
	f.Add("\xff\xfe\xfd", 2)
	f.Add(strings.Repeat("x", 5000), 100)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max > 1<<20 || max < -1 {
			max %= 1 << 20
		}
		got := agent.CapToolResult(s, max)
		limit := max
		if limit <= 0 {
			limit = agent.MaxToolResultBytes
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 output")
		}
		if len(got) > limit {
			t.Fatalf("len %d > max %d", len(got), limit)
		}
		valid := strings.ToValidUTF8(s, "\uFFFD")
		if len(valid) <= limit {
			if got != valid {
				t.Fatalf("short input altered")
			}
			return
		}
		// Whatever is kept is a prefix of the input, or a head and a tail
		// around a marker. The input may itself contain marker-like text,
		// so accept any split that works.
		if strings.HasPrefix(valid, got) {
			return
		}
		for _, m := range cutRe.FindAllStringSubmatchIndex(got, -1) {
			head, tail := got[:m[0]], got[m[1]:]
			if strings.HasPrefix(valid, head) && strings.HasSuffix(valid, tail) {
				return
			}
		}
		t.Fatalf("output is neither a prefix nor head+marker+tail of the input")
	})
}

func FuzzParseShellArgs(f *testing.F) {
	for _, s := range []string{
		`{"commands":["ls"]}`, `{"commands":["ls"],"timeout_ms":1000}`, `{"commands":[]}`, `{}`, `null`, `[]`,
		`{"commands":["a","b"],"timeout_ms":1e3}`, `{"command":"x"}`, `{"commands":[""]}`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		args, err := agent.ParseShellArgs(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid arguments for shell: ") {
				t.Fatalf("error not phrased for the model: %v", err)
			}
			return
		}
		if n := len(args.Commands); n == 0 || n > agent.MaxShellCommands {
			t.Fatalf("accepted %d commands", n)
		}
		for _, c := range args.Commands {
			if strings.TrimSpace(c) == "" || len(c) > agent.MaxShellCommandBytes || strings.IndexByte(c, 0) >= 0 {
				t.Fatalf("accepted bad command %q", c)
			}
		}
		if args.TimeoutMs < 0 || args.Timeout(0, 0) < 0 {
			t.Fatalf("accepted timeout %d", args.TimeoutMs)
		}
	})
}

func FuzzIsReadOnly(f *testing.F) {
	for _, s := range []string{"ls", "ls | wc", "rm x", "echo 'a;b'", `cat "x" 2>&1`, "find . -exec rm {} ;", "git log"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if !agent.IsReadOnly(cmd) {
			return
		}
		// Anything judged read-only has no unquoted control characters
		// and is stable.
		if strings.ContainsAny(cmd, "\n\r\x00") {
			t.Fatalf("read-only with a newline/NUL: %q", cmd)
		}
		if !agent.IsReadOnly(cmd) || agent.NeedsApproval("unless-readonly", []string{cmd}) {
			t.Fatalf("unstable verdict for %q", cmd)
		}
		// Whatever a read-only command looks like, chaining, redirecting or
		// piping into a shell after it must need approval: the tokenizer
		// must have ended outside any quote or escape.
		for _, suffix := range []string{"; rm -rf x", " && rm x", " || rm x", " & rm x", " > out", " >> out", " | sh", " $(rm x)", " `rm x`", "\nrm x"} {
			if agent.IsReadOnly(cmd + suffix) {
				t.Fatalf("read-only: %q", cmd+suffix)
			}
		}
	})
}
