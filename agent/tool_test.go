package agent_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/session"
)

func TestShellToolDefinition(t *testing.T) {
	def := agent.ShellTool()
	if def.Name != session.ShellToolName || def.Description == "" {
		t.Fatalf("def = %+v", def)
	}
	raw, err := json.Marshal(def.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Type                 string
		Required             []string
		AdditionalProperties *bool `json:"additionalProperties"`
		Properties           map[string]struct {
			Type        string
			Description string
			MinItems    *int `json:"minItems"`
			MaxItems    *int `json:"maxItems"`
			Minimum     *int
			Items       map[string]any
		}
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	c, tm := schema.Properties["commands"], schema.Properties["timeout_ms"]
	if schema.Type != "object" || !reflect.DeepEqual(schema.Required, []string{"commands"}) ||
		c.Type != "array" || c.Items["type"] != "string" || c.MinItems == nil || *c.MinItems != 1 ||
		c.MaxItems == nil || *c.MaxItems != agent.MaxShellCommands || c.Description == "" ||
		tm.Type != "integer" || tm.Minimum == nil || *tm.Minimum != 0 || tm.Description == "" ||
		schema.AdditionalProperties == nil || *schema.AdditionalProperties {
		t.Fatalf("schema = %s", raw)
	}
}

func TestParseShellArgs(t *testing.T) {
	long := strings.Repeat("x", agent.MaxShellCommandBytes)
	many := make([]string, agent.MaxShellCommands+1)
	for i := range many {
		many[i] = "true"
	}
	manyJSON, _ := json.Marshal(map[string]any{"commands": many})
	for _, tc := range []struct {
		raw  string
		want session.ShellArgs
		err  string // substring; empty means success
	}{
		{`{"commands":["ls"]}`, session.ShellArgs{Commands: []string{"ls"}}, ""},
		{` {"commands":["ls","pwd"],"timeout_ms":30000} `, session.ShellArgs{Commands: []string{"ls", "pwd"}, TimeoutMs: 30000}, ""},
		{`{"commands":["ls"],"timeout_ms":30000.0}`, session.ShellArgs{Commands: []string{"ls"}, TimeoutMs: 30000}, ""},
		{`{"commands":["ls"],"timeout_ms":null}`, session.ShellArgs{Commands: []string{"ls"}}, ""},
		{`{"commands":["ls"],"timeout_ms":0}`, session.ShellArgs{Commands: []string{"ls"}}, ""},
		{`{"commands":["ls"],"workdir":"/tmp","env":{}}`, session.ShellArgs{}, `unknown field "env", "workdir"`},
		{`{"commands":["ls"],"commands":["pwd"]}`, session.ShellArgs{Commands: []string{"pwd"}}, ""},
		{`{"commands":["` + long + `"]}`, session.ShellArgs{Commands: []string{long}}, ""},
		{``, session.ShellArgs{}, "arguments are empty"},
		{`   `, session.ShellArgs{}, "arguments are empty"},
		{`{not json`, session.ShellArgs{}, "not valid JSON"},
		{`["ls"]`, session.ShellArgs{}, "must be a JSON object, not array"},
		{`"ls"`, session.ShellArgs{}, "must be a JSON object, not string"},
		{`{"commands":["ls"]} {"x":1}`, session.ShellArgs{}, "trailing data"},
		{`{}`, session.ShellArgs{}, `"commands" is missing`},
		{`null`, session.ShellArgs{}, `"commands" is missing`},
		{`{"command":"ls"}`, session.ShellArgs{}, `not "command"`},
		{`{"commands":"ls"}`, session.ShellArgs{}, "must be an array of strings"},
		{`{"commands":[1,2]}`, session.ShellArgs{}, "must be an array of strings"},
		{`{"commands":[]}`, session.ShellArgs{}, `"commands" is empty`},
		{`{"commands":["ls",""]}`, session.ShellArgs{}, "command 2 is empty"},
		{`{"commands":["  \t "]}`, session.ShellArgs{}, "command 1 is empty"},
		{`{"commands":["` + long + `x"]}`, session.ShellArgs{}, fmt.Sprintf("at most %d", agent.MaxShellCommandBytes)},
		{string(manyJSON), session.ShellArgs{}, fmt.Sprintf("has %d entries; at most %d", agent.MaxShellCommands+1, agent.MaxShellCommands)},
		{`{"commands":["a\u0000b"]}`, session.ShellArgs{}, "NUL byte"},
		{`{"commands":["ls"],"timeout_ms":-1}`, session.ShellArgs{}, "must not be negative"},
		{`{"commands":["ls"],"timeout_ms":1.5}`, session.ShellArgs{}, "whole number"},
		{`{"commands":["ls"],"timeout_ms":"100"}`, session.ShellArgs{}, "not a string"},
		{`{"commands":["ls"],"timeout_ms":1e300}`, session.ShellArgs{}, "too large"},
	} {
		got, err := agent.ParseShellArgs(tc.raw)
		name := tc.raw
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		if tc.err == "" {
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: got %+v, %v; want %+v", name, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: want error containing %q, got %+v", name, tc.err, got)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.err) || !strings.HasPrefix(msg, "invalid arguments for shell: ") || !strings.Contains(msg, `expected {"commands":[`) {
			t.Errorf("%s: error %q lacks %q or the expected-shape hint", name, msg, tc.err)
		}
	}
}

func TestShellArgsTimeout(t *testing.T) {
	for _, tc := range []struct {
		ms            int64
		def, max, out time.Duration
	}{
		{0, 30 * time.Second, 10 * time.Minute, 30 * time.Second},
		{5000, 30 * time.Second, 10 * time.Minute, 5 * time.Second},
		{3_600_000, 30 * time.Second, 10 * time.Minute, 10 * time.Minute},
		{3_600_000, 30 * time.Second, 0, time.Hour},
		{0, 20 * time.Minute, 10 * time.Minute, 10 * time.Minute},
	} {
		if got := (session.ShellArgs{TimeoutMs: tc.ms}).Timeout(tc.def, tc.max); got != tc.out {
			t.Errorf("Timeout(ms=%d, def=%v, max=%v) = %v, want %v", tc.ms, tc.def, tc.max, got, tc.out)
		}
	}
}

func TestParseShareFileArgs(t *testing.T) {
	for raw, want := range map[string]string{
		`{"path":"out/report.pdf"}`: "",
		`{"path":""}`:               `"path" must be a non-empty string`,
		`{"path":7}`:                `"path" must be a non-empty string`,
		`{"file":"x"}`:              `unknown field "file"`,
		`{"path":"a"} {"path":"b"}`: "not one JSON object",
		`not json`:                  "not one JSON object",
		`{"path":"a\u0000b"}`:       "NUL byte",
	} {
		args, err := agent.ParseShareFileArgs(raw)
		switch {
		case want == "" && (err != nil || args.Path != "out/report.pdf"):
			t.Errorf("%s: %+v, %v", raw, args, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `expected {"path"`)):
			t.Errorf("%s: err %v, want it to say %q and what is expected", raw, err, want)
		}
	}
}
