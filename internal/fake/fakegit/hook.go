package fakegit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// hookScript returns the pre-receive hook that refuses updates of the
// branches matching patterns (path.Match syntax), printing the line a
// GitHub user would recognise, "protected branch: refs/heads/X cannot be
// pushed to", which the client shows as a "remote:" line.
//
// A shell case pattern differs from path.Match in one way that matters
// for branch names: its '*' and '?' also match '/'. The script therefore
// also requires the branch to have exactly as many slashes as the
// pattern has literal ones; then every slash of the branch is matched by
// one of the pattern, and no wildcard can span a '/'.
func hookScript(patterns []string) (string, error) {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# pre-receive hook written by fakegit from Options.Protected: refuses
# pushes to protected branches, as GitHub does.
status=0
while read -r old new ref; do
	case $ref in
	refs/heads/*) branch=${ref#refs/heads/} ;;
	*) continue ;;
	esac
	rest=$branch
	slashes=0
	while :; do
		case $rest in
		*/*) rest=${rest#*/}; slashes=$((slashes + 1)) ;;
		*) break ;;
		esac
	done
	protected=no
`)
	for i, p := range patterns {
		pat, slashes, err := casePattern(p)
		if err != nil {
			return "", fmt.Errorf("pattern %q: %w", p, err)
		}
		fmt.Fprintf(&b, "\t# Protected[%d] = %s\n", i, strconv.Quote(p))
		fmt.Fprintf(&b, "\tif [ \"$slashes\" -eq %d ]; then case $branch in %s) protected=yes ;; esac; fi\n", slashes, pat)
	}
	b.WriteString(`	if [ "$protected" = yes ]; then
		echo "protected branch: $ref cannot be pushed to"
		status=1
	fi
done
exit $status
`)
	return b.String(), nil
}

// casePattern translates a path.Match pattern into a POSIX shell case
// pattern and counts its literal slashes. Literal text is single-quoted,
// so no character of a branch name can reach the shell as syntax.
// Character classes may hold only letters, digits, '.', '_' and ranges,
// which is all a branch name needs and keeps both syntaxes equivalent.
func casePattern(p string) (pat string, slashes int, err error) {
	if p == "" {
		return "", 0, errors.New("empty pattern")
	}
	var out, lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out.WriteString("'" + strings.ReplaceAll(lit.String(), "'", `'\''`) + "'")
			lit.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < ' ' || c == 0x7f {
			return "", 0, errors.New("control character")
		}
		switch c {
		case '*', '?':
			flush()
			out.WriteByte(c)
		case '\\':
			i++
			if i == len(p) {
				return "", 0, errors.New("trailing backslash")
			}
			if p[i] == '/' {
				slashes++
			}
			lit.WriteByte(p[i])
		case '[':
			flush()
			class, n, err := classPattern(p[i:])
			if err != nil {
				return "", 0, err
			}
			out.WriteString(class)
			i += n - 1
		case ']':
			return "", 0, errors.New("unmatched ']'")
		default:
			if c == '/' {
				slashes++
			}
			lit.WriteByte(c)
		}
	}
	flush()
	return out.String(), slashes, nil
}

// classPattern translates the character class at the start of p and
// returns it with the number of bytes it took.
func classPattern(p string) (string, int, error) {
	var out strings.Builder
	out.WriteByte('[')
	i := 1
	if i < len(p) && p[i] == '^' {
		out.WriteByte('!')
		i++
	}
	ranges := 0
	for {
		if i >= len(p) {
			return "", 0, errors.New("unterminated character class")
		}
		if p[i] == ']' && ranges > 0 {
			out.WriteByte(']')
			return out.String(), i + 1, nil
		}
		lo, n, err := classChar(p[i:])
		if err != nil {
			return "", 0, err
		}
		i += n
		out.WriteByte(lo)
		if i < len(p) && p[i] == '-' {
			hi, n, err := classChar(p[i+1:])
			if err != nil {
				return "", 0, err
			}
			if hi < lo {
				return "", 0, errors.New("inverted range in character class")
			}
			i += 1 + n
			out.WriteByte('-')
			out.WriteByte(hi)
		}
		ranges++
	}
}

// classChar reads one (possibly backslash-escaped) class member.
func classChar(p string) (byte, int, error) {
	n := 1
	if len(p) > 0 && p[0] == '\\' {
		p = p[1:]
		n = 2
	}
	if len(p) == 0 {
		return 0, 0, errors.New("unterminated character class")
	}
	c := p[0]
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' {
		return c, n, nil
	}
	return 0, 0, fmt.Errorf("character %q in a class is not supported", c)
}
