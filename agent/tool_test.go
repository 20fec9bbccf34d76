package agent_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/agent"
)

func TestShellToolDefinition(t *testing.T) {
	def := agent.ShellTool()
	if def.Name != agent.ShellToolName || def.Description == "" {
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
		want agent.ShellArgs
		err  string // substring; empty means success
	}{
		{`{"commands":["ls"]}`, agent.ShellArgs{Commands: []string{"ls"}}, ""},
		{` {"commands":["ls","pwd"],"timeout_ms":30000} `, agent.ShellArgs{Commands: []string{"ls", "pwd"}, TimeoutMs: 30000}, ""},
		{`{"commands":["ls"],"timeout_ms":30000.0}`, agent.ShellArgs{Commands: []string{"ls"}, TimeoutMs: 30000}, ""},
		{`{"commands":["ls"],"timeout_ms":null}`, agent.ShellArgs{Commands: []string{"ls"}}, ""},
		{`{"commands":["ls"],"timeout_ms":0}`, agent.ShellArgs{Commands: []string{"ls"}}, ""},
		{`{"commands":["ls"],"workdir":"/tmp","env":{}}`, agent.ShellArgs{}, `unknown field "env", "workdir"`},
		{`{"commands":["ls"],"commands":["pwd"]}`, agent.ShellArgs{Commands: []string{"pwd"}}, ""},
		{`{"commands":["` + long + `"]}`, agent.ShellArgs{Commands: []string{long}}, ""},
		{``, agent.ShellArgs{}, "arguments are empty"},
		{`   `, agent.ShellArgs{}, "arguments are empty"},
		{`{not json`, agent.ShellArgs{}, "not valid JSON"},
		{`["ls"]`, agent.ShellArgs{}, "must be a JSON object, not array"},
		{`"ls"`, agent.ShellArgs{}, "must be a JSON object, not string"},
		{`{"commands":["ls"]} {"x":1}`, agent.ShellArgs{}, "trailing data"},
		{`{}`, agent.ShellArgs{}, `"commands" is missing`},
		{`null`, agent.ShellArgs{}, `"commands" is missing`},
		{`{"command":"ls"}`, agent.ShellArgs{}, `not "command"`},
		{`{"commands":"ls"}`, agent.ShellArgs{}, "must be an array of strings"},
		{`{"commands":[1,2]}`, agent.ShellArgs{}, "must be an array of strings"},
		{`{"commands":[]}`, agent.ShellArgs{}, `"commands" is empty`},
		{`{"commands":["ls",""]}`, agent.ShellArgs{}, "command 2 is empty"},
		{`{"commands":["  \t "]}`, agent.ShellArgs{}, "command 1 is empty"},
		{`{"commands":["` + long + `x"]}`, agent.ShellArgs{}, fmt.Sprintf("at most %d", agent.MaxShellCommandBytes)},
		{string(manyJSON), agent.ShellArgs{}, fmt.Sprintf("has %d entries; at most %d", agent.MaxShellCommands+1, agent.MaxShellCommands)},
		{`{"commands":["a\u0000b"]}`, agent.ShellArgs{}, "NUL byte"},
		{`{"commands":["ls"],"timeout_ms":-1}`, agent.ShellArgs{}, "must not be negative"},
		{`{"commands":["ls"],"timeout_ms":1.5}`, agent.ShellArgs{}, "whole number"},
		{`{"commands":["ls"],"timeout_ms":"100"}`, agent.ShellArgs{}, "not a string"},
		{`{"commands":["ls"],"timeout_ms":1e300}`, agent.ShellArgs{}, "too large"},
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
		if got := (agent.ShellArgs{TimeoutMs: tc.ms}).Timeout(tc.def, tc.max); got != tc.out {
			t.Errorf("Timeout(ms=%d, def=%v, max=%v) = %v, want %v", tc.ms, tc.def, tc.max, got, tc.out)
		}
	}
}
