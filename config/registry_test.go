package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

var varName = regexp.MustCompile(`SANDBOT_[A-Z0-9_]+`)

// unknownNames returns the SANDBOT_* names in text that are neither
// registered settings nor listed in OtherNames. A name ending in "_" is a
// prefix ("SANDBOT_DISCORD_ALLOWED_*") and must start a registered name.
func unknownNames(text string) []string {
	var out []string
	for _, n := range varName.FindAllString(text, -1) {
		if _, ok := Lookup(n); ok {
			continue
		}
		if _, ok := OtherNames[n]; ok {
			continue
		}
		if strings.HasSuffix(n, "_") && prefixOfAVar(n) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func prefixOfAVar(p string) bool {
	for _, v := range registry {
		if strings.HasPrefix(v.Name, p) {
			return true
		}
	}
	return false
}

// badValue is a value of the right type that every check of a variable of
// that type refuses (or that does not parse, with malformed).
func badValue(t *testing.T, v Var, malformed bool) string {
	switch v.field(&Config{}).(type) {
	case *string:
		return "x y <not valid>"
	case *[]string:
		return "@not an id, vm"
	case *bool:
		if malformed {
			return "maybe"
		}
		return "true"
	case *int, *int64:
		if malformed {
			return "lots"
		}
		return "-1"
	case *float64:
		if malformed {
			return "many"
		}
		return "-1"
	case *time.Duration:
		if malformed {
			return "soon"
		}
		return "-1s"
	case *Bytes:
		if malformed {
			return "huge"
		}
		return "1k"
	}
	t.Fatalf("%s: no bad value for %T", v.Name, v.field(&Config{}))
	return ""
}

// TestEveryNameInValidateIsRegistered drives Validate with bad values for
// every variable, for every process and in every mode that gates checks,
// and requires every message to be worded "<variable>: ...; use ..." and
// every variable named in a message to be registered.
func TestEveryNameInValidateIsRegistered(t *testing.T) {
	named := map[string]bool{}
	type variant struct {
		env []string
		// edit changes the loaded config, for values no environment can
		// give (an empty variable takes its default).
		edit func(*Config)
	}
	variants := []variant{
		{},
		{env: []string{"SANDBOT_SLACK_MODE", "http"}},
		{env: []string{"SANDBOT_SLACK_MODE", "socket", "SANDBOT_SANDBOX_BACKENDS", "local,docker", "SANDBOT_DOCKER_NETWORK", "host",
			"SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", "10m", "SANDBOT_SESSION_COMMAND_TIMEOUT", "20m"}},
		{env: []string{"SANDBOT_DISCORD_GUILD_ID", "4000000000000000001", "SANDBOT_DISCORD_ALLOWED_GUILDS", "4000000000000000002",
			"SANDBOT_DEV_UI_PORT", "7233", "SANDBOT_DEV_TEMPORAL_PORT", "7233"}},
		{edit: func(c *Config) {
			for _, v := range registry {
				if s, ok := v.field(c).(*string); ok {
					*s = ""
				}
			}
			c.Slack.BotToken, c.Slack.Mode = "xoxb-1", "http"
		}},
	}
	for _, malformed := range []bool{false, true} {
		for _, vr := range variants {
			m := map[string]string{}
			for _, v := range registry {
				m[v.Name] = badValue(t, v, malformed)
			}
			for i := 0; i+1 < len(vr.env); i += 2 {
				m[vr.env[i]] = vr.env[i+1]
			}
			c := load(func(k string) (string, bool) { s, ok := m[k]; return s, ok })
			if vr.edit != nil {
				vr.edit(c)
			}
			for _, role := range []Role{RoleWorker, RoleBot, RoleDev} {
				err := c.Validate(role)
				if err == nil {
					t.Fatalf("%s accepted bad values everywhere", role)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					name, _, ok := strings.Cut(line, ": ")
					if !ok || !strings.Contains(line, "; use ") {
						t.Errorf("%q is not worded \"<variable>: ...; use ...\"", line)
					}
					named[name] = true
					if _, ok := Lookup(name); !ok {
						t.Errorf("Validate names %s, which is not registered: %q", name, line)
					}
					if u := unknownNames(line); len(u) > 0 {
						t.Errorf("Validate mentions unregistered %v: %q", u, line)
					}
				}
			}
		}
	}
	// Every variable with a check is exercised by this test.
	for _, v := range registry {
		if v.check != nil && !named[v.Name] && v.Name != "SANDBOT_SANDBOX_HOST_ID" {
			t.Errorf("no bad value made Validate report %s; extend the variants", v.Name)
		}
	}
}

// TestEveryNameInTheRepositoryIsRegistered greps the module (Go files, the
// README, docs/ and deploy/) for SANDBOT_* names: each must be registered,
// so a misspelt or invented variable in a message, comment or document
// fails here.
func TestEveryNameInTheRepositoryIsRegistered(t *testing.T) {
	if u := unknownNames("set " + "SANDBOT_" + "NO_SUCH_SETTING and SANDBOT_MODEL_NAME"); len(u) != 1 {
		t.Fatalf("the check does not catch an invented name: %v", u)
	}
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		ok := strings.HasSuffix(path, ".go") || rel == "README.md" ||
			(dir == "docs" && strings.HasSuffix(path, ".md")) || dir == "deploy"
		if !ok {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range unknownNames(line) {
				t.Errorf("%s:%d: %s is not a registered variable (config/registry.go) nor in config.OtherNames", rel, i+1, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d files scanned under %s", files, root)
	}
}

// TestReadmeTable: the README's configuration table is the registry, row
// for row: name, default, who reads it, meaning.
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		if tableRow.MatchString(line) {
			got = append(got, line)
		}
	}
	want := strings.Split(strings.TrimSpace(readmeRows()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("README.md's configuration table differs from the registry; it should read:\n\n%s\n%s", readmeHeader, readmeRows())
	}
}

// tableRow matches a row of the README's configuration table.
var tableRow = regexp.MustCompile("^\\| `[A-Z][A-Z0-9_]*` \\|")

const readmeHeader = "| variable | default | read by | meaning |\n|---|---|---|---|"

func readmeRows() string {
	var b strings.Builder
	for _, v := range registry {
		def := v.Documented()
		if def != "" && !strings.HasPrefix(def, "(") && def != "hostname" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, v.Readers, v.Doc)
	}
	return b.String()
}

func TestRegistryIsComplete(t *testing.T) {
	var names []string
	for _, v := range registry {
		if v.Doc == "" || v.Readers == 0 || v.field == nil {
			t.Errorf("%s: needs a meaning, readers and a field", v.Name)
		}
		if v.Default != "" && v.DefaultDoc != "" {
			t.Errorf("%s: has both a default and a documented default", v.Name)
		}
		if v.Default != "" {
			if msg := parseInto(v.field(&Config{}), v.Default); msg != "" {
				t.Errorf("%s: default %s", v.Name, msg)
			}
		}
		names = append(names, v.Name)
	}
	sort.Strings(names)
	for n := range OtherNames {
		if _, ok := Lookup(n); ok {
			t.Errorf("%s is both a setting and another name", n)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
