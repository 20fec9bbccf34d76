package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
	openai "github.com/sashabaranov/go-openai"
)

// Limits on one shell call's arguments. They keep a confused model from
// queueing unbounded work or bloating history.
const (
	MaxShellCommands     = 20
	MaxShellCommandBytes = 16 << 10
)

// shellSchema is the JSON schema of the shell tool's parameters. It is kept
// as literal JSON so what the model sees is reviewable in one place.
const shellSchema = `{
  "type": "object",
  "properties": {
    "commands": {
      "type": "array",
      "description": "Shell commands to run, in order. Each runs separately with /bin/sh -c in the workspace root (the current directory); a failing command does not stop the ones after it, so join steps that depend on each other with && inside one command.",
      "items": {"type": "string", "minLength": 1},
      "minItems": 1,
      "maxItems": 20
    },
    "timeout_ms": {
      "type": "integer",
      "minimum": 0,
      "description": "Optional timeout for each command, in milliseconds. Omit it for the default; set it for builds, tests and other commands that may run long. The command is killed when it expires."
    }
  },
  "required": ["commands"],
  "additionalProperties": false
}`

// ShellTool is the function definition of the shell tool, the only tool the
// agent has.
func ShellTool() openai.FunctionDefinition {
	return openai.FunctionDefinition{
		Name: session.ShellToolName,
		Description: "Run shell commands in this session's sandboxed workspace and get back each command's stdout, stderr and exit code. " +
			"Commands are non-interactive (no TTY, no stdin). Long output is shortened. Some commands wait for a human's approval before they run.",
		Parameters: json.RawMessage(shellSchema),
	}
}

// argsHint ends every argument error so the model can correct itself.
const argsHint = `; expected {"commands":["<command>", ...],"timeout_ms":<optional integer>}`

// ParseShellArgs decodes and validates the shell tool's JSON arguments. Its
// errors are written for the model, which receives them as the tool result.
func ParseShellArgs(raw string) (session.ShellArgs, error) {
	fail := func(format string, a ...any) (session.ShellArgs, error) {
		return session.ShellArgs{}, fmt.Errorf("invalid arguments for shell: "+format+argsHint, a...)
	}
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return fail("the arguments are empty")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(trimmed))
	if err := dec.Decode(&fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fail("the arguments must be a JSON object, not %s", typeErr.Value)
		}
		return fail("the arguments are not valid JSON (%v)", err)
	}
	if dec.More() {
		return fail("there is trailing data after the JSON object")
	}
	var unknown []string
	for k := range fields {
		if k != "commands" && k != "timeout_ms" {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	slices.Sort(unknown) // deterministic message
	commands, timeout := fields["commands"], fields["timeout_ms"]
	if len(commands) == 0 || string(commands) == "null" {
		if _, ok := fields["command"]; ok {
			return fail(`"commands" is missing (use "commands", an array of strings, not "command")`)
		}
		return fail(`"commands" is missing`)
	}
	if len(unknown) > 0 {
		// Ignoring e.g. "workdir" would run the commands somewhere the
		// model did not mean; say so instead.
		return fail("unknown field %s: only \"commands\" and \"timeout_ms\" are accepted (to work in a directory, use \"cd <dir> && <command>\")", strings.Join(unknown, ", "))
	}
	var args session.ShellArgs
	if err := json.Unmarshal(commands, &args.Commands); err != nil {
		return fail(`"commands" must be an array of strings`)
	}
	switch n := len(args.Commands); {
	case n == 0:
		return fail(`"commands" is empty; give at least one command`)
	case n > MaxShellCommands:
		return fail(`"commands" has %d entries; at most %d are allowed per call`, n, MaxShellCommands)
	}
	for i, c := range args.Commands {
		switch {
		case strings.TrimSpace(c) == "":
			return fail("command %d is empty", i+1)
		case len(c) > MaxShellCommandBytes:
			return fail("command %d is %d bytes; at most %d are allowed (write long scripts to a file in steps instead)", i+1, len(c), MaxShellCommandBytes)
		case strings.IndexByte(c, 0) >= 0:
			return fail("command %d contains a NUL byte", i+1)
		}
	}
	if len(timeout) > 0 && string(timeout) != "null" {
		ms, err := parseMillis(timeout)
		if err != nil {
			return fail(`"timeout_ms" %v`, err)
		}
		args.TimeoutMs = ms
	}
	return args, nil
}

// maxMillis keeps timeout_ms convertible to a time.Duration.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// parseMillis accepts a non-negative integer, also written as a float with
// no fraction (30000.0), which some models emit.
func parseMillis(raw json.RawMessage) (int64, error) {
	if bytes.HasPrefix(raw, []byte(`"`)) {
		return 0, errors.New("must be a number, not a string")
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, errors.New("must be an integer number of milliseconds")
	}
	switch {
	case f < 0:
		return 0, errors.New("must not be negative")
	case f != math.Trunc(f):
		return 0, errors.New("must be a whole number of milliseconds")
	case f > float64(maxMillis):
		return 0, fmt.Errorf("is too large (at most %d)", maxMillis)
	}
	return int64(f), nil
}

// shareFileSchema is the JSON schema of the share_file tool's parameters.
const shareFileSchema = `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "minLength": 1,
      "description": "The file's path relative to the workspace root (the current directory of your shell commands)."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`

// ShareFileTool is the function definition of the share_file tool: it
// posts a workspace file to the chat thread (the terminal prints its path).
func ShareFileTool() openai.FunctionDefinition {
	return openai.FunctionDefinition{
		Name: session.ShareFileToolName,
		Description: "Post one file from the workspace to the chat thread, so the people there can download it (a report, an image, a patch, a build artifact). " +
			"It must be a regular file inside the workspace and within the size limit; archive a directory first. Files the user attached are in attachments/.",
		Parameters: json.RawMessage(shareFileSchema),
	}
}

// ParseShareFileArgs decodes and validates the share_file tool's
// arguments. Its errors are written for the model.
func ParseShareFileArgs(raw string) (session.ShareFileArgs, error) {
	const hint = `; expected {"path":"<file in the workspace>"}`
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(raw)))
	if err := dec.Decode(&fields); err != nil || dec.More() {
		return session.ShareFileArgs{}, fmt.Errorf("invalid arguments for share_file: not one JSON object" + hint)
	}
	// The workflow calls this: the first unknown key in sorted order, so
	// the error is the same on every replay.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "path" {
			return session.ShareFileArgs{}, fmt.Errorf("invalid arguments for share_file: unknown field %q; only \"path\" is accepted"+hint, k)
		}
	}
	var args session.ShareFileArgs
	if err := json.Unmarshal(fields["path"], &args.Path); err != nil || strings.TrimSpace(args.Path) == "" {
		return session.ShareFileArgs{}, fmt.Errorf(`invalid arguments for share_file: "path" must be a non-empty string` + hint)
	}
	if len(args.Path) > 4096 || strings.IndexByte(args.Path, 0) >= 0 {
		return session.ShareFileArgs{}, fmt.Errorf(`invalid arguments for share_file: "path" is too long or contains a NUL byte` + hint)
	}
	return args, nil
}
