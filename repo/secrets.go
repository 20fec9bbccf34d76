package repo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbot/sandbot/redact"
)

// Finding is a line of a file that holds what looks like a secret. It
// never holds the secret itself, so it can be shown in the chat.
type Finding struct {
	Path string
	Line int
	Rule string
}

// String is "path:line (rule)".
func (f Finding) String() string { return f.Path + ":" + strconv.Itoa(f.Line) + " (" + f.Rule + ")" }

// MaxScanBytes is how much of each file ScanSecrets reads: a secret is
// almost always near the top of a config file, and a huge file must not
// stall a push.
const MaxScanBytes = 10 << 20

// RuleKnownSecret names a finding of one of the worker's own secrets.
const RuleKnownSecret = "known-secret"

// rule is one pattern of secret. Matching starts with a literal prefix
// found by strings.Index (fast on megabytes) and only then runs the
// anchored expression on a short window after it.
type rule struct {
	name     string
	prefixes []string
	re       *regexp.Regexp // anchored at the prefix
	// edge requires no identifier character right before the match, and
	// exact requires none right after it, so that "xAKIA..." inside a
	// longer word, or a 21-character run, is not taken for a key.
	edge, exact bool
	check       func(string) bool
}

// window bounds how far past a prefix a match may reach.
const window = 512

var rules = []rule{
	{name: "aws-access-key-id", prefixes: []string{"AKIA", "ASIA"}, re: regexp.MustCompile(`^(?:AKIA|ASIA)[0-9A-Z]{16}`), edge: true, exact: true},
	{name: "github-token", prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, re: regexp.MustCompile(`^gh[pousr]_[A-Za-z0-9_]{36,}`), edge: true},
	{name: "github-token", prefixes: []string{"github_pat_"}, re: regexp.MustCompile(`^github_pat_[A-Za-z0-9_]{22,}`), edge: true},
	{name: "slack-token", prefixes: []string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"}, re: regexp.MustCompile(`^xox[abprs]-[A-Za-z0-9-]{10,}`), edge: true},
	{name: "slack-webhook", prefixes: []string{"hooks.slack.com/"}, re: regexp.MustCompile(`^hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}`)},
	{name: "openai-api-key", prefixes: []string{"sk-"}, re: regexp.MustCompile(`^sk-(?:proj-)?[A-Za-z0-9_-]{20,}`), edge: true, check: lettersAndDigits},
	{name: "private-key", prefixes: []string{"-----BEGIN "}, re: regexp.MustCompile(`^-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
	{name: "google-api-key", prefixes: []string{"AIza"}, re: regexp.MustCompile(`^AIza[0-9A-Za-z_-]{35}`), edge: true, exact: true},
	{name: "stripe-live-key", prefixes: []string{"sk_live_"}, re: regexp.MustCompile(`^sk_live_[0-9A-Za-z]{10,}`), edge: true},
}

// ScanSecrets reads the files (paths relative to root, with forward
// slashes; symlinks are not followed, files over MaxScanBytes are scanned
// in their first MaxScanBytes) and reports those holding one of the
// worker's known secrets (exact, or base64/hex/URL-encoded forms: the
// redact package's Redactor knows them; values shorter than redact.MinLen
// are not looked for) or a common secret pattern: AWS access key IDs,
// GitHub tokens, Slack tokens and webhook URLs, OpenAI keys, PEM private
// keys, Google API keys and Stripe live keys.
//
// A path that does not exist, or is a symlink or anything but a regular
// file, is skipped: it has no content of its own to leak. A path that
// leaves root is an error. Findings are sorted by path and line, one per
// rule and line.
func ScanSecrets(root string, paths []string, known []string) ([]Finding, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("repo: scan secrets: %w", err)
	}
	defer r.Close()
	secrets := make([]redact.Secret, 0, len(known))
	for _, k := range known {
		secrets = append(secrets, redact.Secret{Name: RuleKnownSecret, Value: k})
	}
	red := redact.New(secrets...)

	var out []Finding
	for _, p := range paths {
		rel := filepath.FromSlash(p)
		if !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("repo: scan secrets: %q is not a path inside the tree", p)
		}
		text, err := readPrefix(r, rel)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("repo: scan secrets: %s: %w", p, err)
		}
		out = append(out, scanText(p, text, red)...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Rule < b.Rule
	})
	return out, nil
}

// errSkip marks a path with nothing to scan.
var errSkip = errors.New("not a regular file")

// readPrefix reads the first MaxScanBytes of the regular file rel, without
// following a symlink at any point: a path through a symlinked directory
// is skipped like a symlink itself, os.Root keeps even a path swapped
// under us inside root, O_NOFOLLOW refuses a final symlink and O_NONBLOCK
// a fifo.
func readPrefix(r *os.Root, rel string) (string, error) {
	parts := strings.Split(rel, string(filepath.Separator))
	for i := 1; i < len(parts); i++ {
		fi, err := r.Lstat(filepath.Join(parts[:i]...))
		if errors.Is(err, fs.ErrNotExist) {
			return "", errSkip
		}
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", errSkip
		}
	}
	fi, err := r.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errSkip
	}
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errSkip
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return "", errSkip
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", errSkip
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxScanBytes))
	return string(b), err
}

// scanText reports the findings of one file's text.
func scanText(path, text string, red *redact.Redactor) []Finding {
	lines := lineIndex(text)
	seen := map[Finding]bool{}
	var out []Finding
	add := func(rule string, off int) {
		f := Finding{Path: path, Line: lineOf(lines, off), Rule: rule}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, ru := range rules {
		for _, pre := range ru.prefixes {
			for from := 0; ; {
				i := strings.Index(text[from:], pre)
				if i < 0 {
					break
				}
				at := from + i
				from = at + len(pre)
				if ru.edge && at > 0 && identChar(text[at-1]) {
					continue
				}
				m := ru.re.FindString(text[at:min(len(text), at+window)])
				if m == "" {
					continue
				}
				if end := at + len(m); ru.exact && end < len(text) && identChar(text[end]) {
					continue
				}
				if ru.check != nil && !ru.check(m) {
					continue
				}
				add(ru.name, at)
			}
		}
	}
	if red.Redact(text) != text {
		found := false
		for n, start := range lines {
			end := len(text)
			if n+1 < len(lines) {
				end = lines[n+1]
			}
			if l := text[start:end]; red.Redact(l) != l {
				add(RuleKnownSecret, start)
				found = true
			}
		}
		if !found {
			// Only visible with lines joined: a base64 or hex stream
			// wrapped over several lines. Report where they differ.
			add(RuleKnownSecret, firstDiff(text, red.Redact(text)))
		}
	}
	return out
}

// lineIndex lists the offsets where each line of text starts.
func lineIndex(text string) []int {
	starts := []int{0}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' && i+1 < len(text) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// lineOf is the 1-based line holding offset off.
func lineOf(starts []int, off int) int {
	return sort.Search(len(starts), func(i int) bool { return starts[i] > off })
}

// firstDiff is the first offset where a and b differ.
func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// identChar reports whether c can be part of a token, so a match right
// after (or before) one is inside a longer word.
func identChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// lettersAndDigits keeps "sk-" matches whose body looks like a key
// (random text has both letters and digits) and drops words that merely
// start with "sk-", like a long kebab-case identifier.
func lettersAndDigits(m string) bool {
	s := strings.TrimPrefix(strings.TrimPrefix(m, "sk-"), "proj-")
	return strings.ContainsAny(s, "0123456789") && strings.IndexFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }) >= 0
}
