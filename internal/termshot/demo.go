package termshot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// StartDev runs a cmd/dev binary with -demo (its built-in scripted model)
// in a pseudo-terminal of cols×rows, so it opens the full-screen app. Its
// state (Temporal database, workspaces, snapshots, log) goes in dataDir,
// and its Temporal frontend and UI listen on free ports. Variables from
// the caller's environment that configure sandbot (SANDBOT_*) are not
// passed on: a developer's Slack token must not start a Slack bot here.
// env is added last (SANDBOT_DEV_UI_PORT=N turns the Temporal UI on).
func StartDev(ctx context.Context, binary, dataDir string, cols, rows int, env ...string) (*Term, error) {
	cmd := exec.CommandContext(ctx, binary, "-demo")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SANDBOT_") && !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "TEMPORAL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TERM=xterm-256color", "COLORTERM=truecolor",
		"SANDBOT_DEV_DATA_DIR="+dataDir, "SANDBOT_DEV_TEMPORAL_PORT=0", "SANDBOT_DEV_UI_PORT=0")
	cmd.Env = append(cmd.Env, env...)
	return Start(cmd, cols, rows)
}

// The demo's two tasks. The demo model runs each "run:" line as a shell
// command, and neither command is read-only, so each asks for approval.
const (
	DemoTask1 = "run: echo 'hello from the sandbox' > hello.txt && wc -c hello.txt"
	DemoTask2 = "run: mkdir -p notes && mv hello.txt notes/ && ls -l notes"
)

// Demo plays the README's scene on a freshly started dev app (StartDev):
// it types a task, approves it with the approval bar's key, waits for the
// answer and for the turn to be done, then types a second task and
// returns while that one waits for approval, the approval bar showing.
// Every wait is on what the screen shows; ctx bounds them all.
func Demo(ctx context.Context, t *Term) error {
	steps := []struct {
		what string
		keys string
		cond func(string) bool
	}{
		{what: "the empty app with its input line and the dev banner", cond: all("Type a task", "sandbot dev", "session default")},
		{what: "the first task's approval bar", keys: DemoTask1 + "\r", cond: all("Approval needed", "$ echo 'hello from the sandbox'", "y approve once")},
		{what: "the answer and the finished turn", keys: "y", cond: func(s string) bool {
			return all("Done", "The command returned", "hello.txt", "exit 0")(s) && !strings.Contains(s, "Approval needed")
		}},
		{what: "the second task's approval bar", keys: DemoTask2 + "\r", cond: all("Approval needed", "$ mkdir -p notes", "y approve once")},
	}
	for _, st := range steps {
		if st.keys != "" {
			if err := t.Type(st.keys); err != nil {
				return err
			}
		}
		if err := t.WaitFor(ctx, st.what, st.cond); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}

// all is a screen condition: every one of subs is on the screen.
func all(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}
