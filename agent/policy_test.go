package agent_test

import (
	"testing"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/session"
)

func TestIsReadOnly(t *testing.T) {
	readOnly := []string{
		"ls", "ls -la", "  ls   -la  ", "pwd", "cat README.md", "cat 'file with spaces.txt'", `cat "a b"`,
		"head -n 20 main.go", "tail -n 50 log.txt", "tail -f app.log", "wc -l *.go", "grep -rn TODO .",
		`grep -rn 'foo$' .`, `grep -E "a|b" file`, "grep -e ';' file", `rg --pre-glob '*.pdf' foo`,
		"rg -n --hidden needle", "find . -name '*.go'", "find . -type f -newer go.mod -print",
		"find . -maxdepth 2 -printf '%p\\n'", "stat go.mod", "file bin/app", "du -sh .", "df -h",
		"tree -L 2", "tree -I node_modules", "echo hello", "echo 'a > b; c && d'", "which go", "basename /a/b",
		"realpath .", "readlink -f x", "sort -n nums.txt", "sort -k2 -t: f", "cut -d: -f1 passwd",
		"diff -u a b", "cmp a b", "sha256sum go.sum", "uname -a", "whoami",
		"git status", "git status --short", "git log --oneline -n 5", "git diff HEAD~1", "git show HEAD:go.mod",
		"git rev-parse HEAD", "git branch", "git branch -a -v", "git branch --show-current", "git --no-pager log",
		"go version", "go env", "go env GOPATH GOOS", "go env -json",
		"ls | wc -l", "cat go.mod | grep module", "git log --oneline | head -5", "find . -name '*.go' | sort | head",
		"ls 2>&1", "ls 2>/dev/null", "ls >/dev/null", "ls 2>&1 | head", "ls 2>&1|head", "grep x f 2>/dev/null | wc -l",
		`l\s`, `'ls'`, `ls \;`, `ls \>x`, "ls #comment",
	}
	for _, c := range readOnly {
		if !agent.IsReadOnly(c) {
			t.Errorf("IsReadOnly(%q) = false, want true", c)
		}
	}
	needsApproval := []string{
		"", "   ", "rm -rf /", "touch x", "mkdir d", "mv a b", "cp a b", "sh -c ls", "bash", "python3 x.py",
		"go test ./...", "go build", "go env -w GOFLAGS=x", "go env -u GOFLAGS", "go version -m bin", "go run .", "make",
		"npm install", "env", "printenv", "sed -n 1p f", "awk '{print}' f", "xargs rm", "tee out",
		"ls > out.txt", "ls >> out.txt", "ls>x", "cat < in", "echo hi > /dev/null", "ls &>/dev/null", "ls 2>x",
		"ls 2>&1x", "ls; rm x", "ls && rm x", "ls || rm x", "ls & rm x", "ls &", "ls |& cat",
		"ls | sh", "cat f | bash", "echo 'rm -rf /' | sh", "ls | tee out", "ls | xargs rm", "| ls", "ls |", "ls | | wc",
		"echo $(rm x)", "echo `rm x`", "echo $HOME", `echo "$HOME"`, "echo \"`id`\"", "echo ${X:=y}",
		"(ls)", "ls\nrm x", "ls\rrm x", "echo 'unterminated", `echo "unterminated`, `ls \`,
		"find . -delete", "find . -exec rm {} ;", "find . -exec rm {} \\;", "find . -execdir ls \\;", "find . -ok rm {} \\;",
		"find . -okdir rm {} +", "find . -fprint out", "find . -fprint0 out", "find . -fprintf out %p", "find . -fls out",
		"find . -name x | xargs rm", "rg --pre cat foo", "rg --pre=cat foo", "rg --hostname-bin=x foo", "rg --pr cat x",
		"tree -o out.txt", "tree -Lo 2 out", "tree -R -H .", "tree --output=x", "file -C -m magic", "file --compile",
		"sort -o out in", "sort -no out in", "sort --output=out in", "sort --out=out in", "sort --compress-program=sh x",
		"git commit -m x", "git push", "git checkout main", "git reset --hard", "git branch new", "git branch -d old",
		"git branch -m a b", "git -c core.pager=sh log", "git -C /tmp status", "git diff --output=patch", "git log --output=x",
		"git diff --ext-diff", "git", "git --no-pager", "git stash", "git clean -fdx", "git apply x.patch",
		"/bin/ls", "./ls", "A=1 ls", "FOO=bar cat x", "nohup ls", "time ls", "exec ls", "command ls",
		"'rm' -rf x", `r\m x`, "ls\x00rm",
	}
	for _, c := range needsApproval {
		if agent.IsReadOnly(c) {
			t.Errorf("IsReadOnly(%q) = true, want false", c)
		}
	}
}

// TestIsReadOnlyStaysInTheWorkspace: reading outside the workspace is never
// auto-approved. Each case is an attack (the first is how the model key was
// read on the old main: /proc/<worker pid>/environ) or a way to write one.
func TestIsReadOnlyStaysInTheWorkspace(t *testing.T) {
	outside := []string{
		// Absolute paths: /proc, /sys, /etc, /dev, the data directory.
		"grep -a SANDBOT /proc/*/environ", "cat /proc/1/environ", "cat /proc/self/environ | tr '\\0' '\\n'",
		"cat /etc/shadow", "head -c 100 /dev/sda", "ls /sys/class/net", "cat /root/.sandbot/temporal.db",
		"ls /", "du -sh /", "find / -name '*.db'", "tail -n 5 /var/log/syslog", "stat /", "cut -d: -f1 /etc/passwd",
		"grep -r key /home", "wc -c /etc/hostname", "diff a /etc/passwd", "sha256sum /usr/bin/sudo", "tree /",
		"readlink /proc/1/cwd", "realpath /etc", "file /dev/sda", "cmp /dev/zero x", "git diff --no-index /etc/passwd x",
		"git log -- /etc", "git show HEAD:/etc/passwd",
		// ..: relative escapes, also inside option values and rev:path.
		"cat ../../x", "ls ..", "ls ../", "cat ./../x", "cat a/../../b", "grep -r x ..", "find .. -name x",
		"tree ..", "git diff --no-index ../other/x y", "git show HEAD:../x", "rg --ignore-file=../x y",
		"grep -f../x y", "sort -T.. x", "head -n1 -- ../x",
		// Home directories.
		"ls ~", "cat ~/.ssh/id_rsa", "ls ~root", "cat ~/.sandbot/temporal.db", "grep -f~/x y", "sort --temporary-directory=~/x f",
		// Options with glued or attached absolute values.
		"grep -f/etc/shadow x", "grep --file=/etc/shadow x", "rg --ignore-file=/etc/x y", "ls --hide=x:/etc",
		// Globs that can match "..", and brace expansion.
		"ls .*", "cat .?/x", "ls .[.]", "cat .*/y", "ls [.]*", "cat {.,.}./x", "ls {..,x}",
	}
	for _, c := range outside {
		if agent.IsReadOnly(c) {
			t.Errorf("IsReadOnly(%q) = true: it reads outside the workspace without approval", c)
		}
	}
	inside := []string{
		"cat README.md", "ls -la", "ls .", "ls ./sub", "cat sub/file.txt", "grep -rn TODO .", "wc -l *.go",
		"cat .gitignore", "ls .github", "cat .env.example", "find . -name '*.go'", "git diff HEAD~1", "git log main..feature",
		"git show HEAD:go.mod", "ls ...", "cat a..b", "echo /etc/shadow", "echo ~", "basename /a/b", "dirname ../x",
		"grep -e foo x", "sort -t: -k2 f", "head -c 100 data.bin", "tail -n+5 f",
	}
	for _, c := range inside {
		if !agent.IsReadOnly(c) {
			t.Errorf("IsReadOnly(%q) = false, want true: it stays in the workspace", c)
		}
	}
}

func TestNeedsApproval(t *testing.T) {
	ro := []string{"ls", "git status"}
	mixed := []string{"ls", "rm -rf build"}
	for _, tc := range []struct {
		mode string
		cmds []string
		want bool
	}{
		{"never", mixed, false},
		{"never", ro, false},
		{"always", ro, true},
		{"always", mixed, true},
		{"unless-readonly", ro, false},
		{"unless-readonly", mixed, true},
		{"unless-readonly", []string{"rm x", "ls"}, true},
		{"unless-readonly", nil, true},
		{"", ro, false},
		{"", mixed, true},
		{" Unless-ReadOnly ", ro, false},
		{"NEVER", mixed, false},
		{"sometimes", ro, true}, // unknown modes fail closed
		{"readonly", ro, true},
	} {
		if got := agent.NeedsApproval(session.ApprovalMode(tc.mode), tc.cmds); got != tc.want {
			t.Errorf("NeedsApproval(%q, %q) = %v, want %v", tc.mode, tc.cmds, got, tc.want)
		}
	}
	// Deterministic: repeated calls agree (workflow replays depend on it).
	for range 100 {
		if agent.NeedsApproval("", ro) || !agent.NeedsApproval("", mixed) {
			t.Fatal("NeedsApproval is not stable")
		}
	}
}
