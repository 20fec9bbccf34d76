package devserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/searchattribute/sadefs"
)

var (
	namespaceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)
	saNameRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)
)

// withDefaults checks opts and fills in defaults, saying what was wrong and what is allowed.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Ephemeral && o.DBPath != "":
		return o, errors.New("devserver: DBPath and Ephemeral exclude each other: set DBPath to keep state in a file, or Ephemeral for an in-memory database")
	case !o.Ephemeral && o.DBPath == "":
		return o, errors.New("devserver: DBPath is required (the SQLite file that keeps sessions across restarts), or set Ephemeral for an in-memory database")
	}
	if o.DBPath != "" {
		abs, err := filepath.Abs(o.DBPath)
		if err != nil {
			return o, fmt.Errorf("devserver: DBPath %q: %w", o.DBPath, err)
		}
		o.DBPath = abs
		if info, err := os.Stat(abs); err == nil && info.IsDir() {
			return o, fmt.Errorf("devserver: DBPath %s is a directory; give a file path such as %s", abs, filepath.Join(abs, "temporal.db"))
		}
	}

	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if net.ParseIP(o.IP) == nil {
		return o, fmt.Errorf("devserver: IP %q is not an IP address (e.g. 127.0.0.1, or 0.0.0.0 for all interfaces)", o.IP)
	}
	if o.Port < 0 || o.Port > 65535 {
		return o, fmt.Errorf("devserver: Port %d is out of range (0 picks a free port, else 1-65535)", o.Port)
	}
	if o.UIPort < 0 || o.UIPort > 65535 {
		return o, fmt.Errorf("devserver: UIPort %d is out of range (0 disables the UI, else 1-65535)", o.UIPort)
	}
	if o.UIPort != 0 && o.UIPort == o.Port {
		return o, fmt.Errorf("devserver: UIPort and Port are both %d; the UI needs a port of its own", o.Port)
	}

	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if !namespaceRE.MatchString(o.Namespace) {
		return o, fmt.Errorf("devserver: Namespace %q is invalid: use 1-255 letters, digits, '.', '_' or '-', starting with a letter or digit", o.Namespace)
	}
	switch {
	case o.Retention == 0:
		o.Retention = DefaultRetention
	case o.Retention < 0:
		return o, fmt.Errorf("devserver: Retention %s is negative (0 means the default, %s)", o.Retention, DefaultRetention)
	}

	for _, name := range sortedKeys(o.SearchAttributes) {
		if err := checkSearchAttribute(name, o.SearchAttributes[name]); err != nil {
			return o, err
		}
	}
	return o, nil
}

func checkSearchAttribute(name string, typ enumspb.IndexedValueType) error {
	if !saNameRE.MatchString(name) {
		return fmt.Errorf("devserver: search attribute %q: name must be 1-64 letters, digits or '_', starting with a letter", name)
	}
	if sadefs.IsReserved(name) {
		return fmt.Errorf("devserver: search attribute %q: the name is reserved by Temporal; choose another (e.g. with a project prefix)", name)
	}
	if _, known := enumspb.IndexedValueType_name[int32(typ)]; !known || typ == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
		return fmt.Errorf("devserver: search attribute %q: type %d is not allowed; use one of Text, Keyword, Int, Double, Bool, Datetime, KeywordList", name, typ)
	}
	return nil
}

// buildDynamicConfig turns the caller's overrides into the server's static client. Each value
// goes through the server's own YAML loader, so an override behaves exactly like the same line
// in a dynamic config file, and an unknown key or a value of the wrong type is an error here
// rather than a warning the server logs once and then ignores.
func buildDynamicConfig(overrides map[string]any) (dynamicconfig.StaticClient, error) {
	// Not system.forceSearchAttributesCacheRefreshOnRead, which Temporal's own dev server sets
	// so that added search attributes are usable at once: it makes every read of the search
	// attribute types a database read, among them one in every workflow task that carries an
	// upsert (several per turn of a session). On SQL visibility those types are the store's
	// fixed columns, written when the server starts; the attributes Start adds are namespace
	// aliases, which the namespace cache serves and awaitSearchAttributes waits for.
	dc := dynamicconfig.StaticClient{}
	for _, name := range sortedKeys(overrides) {
		value := overrides[name]
		if d, isDuration := value.(time.Duration); isDuration {
			value = d.String() // the YAML form; a bare number would mean seconds
		}
		raw, err := json.Marshal([]map[string]any{{"value": value}}) // JSON is YAML
		if err != nil {
			return nil, fmt.Errorf("devserver: dynamic config %q: value %v cannot be encoded: %w", name, overrides[name], err)
		}
		key := dynamicconfig.MakeKey(name)
		var loader dynamicconfig.YamlLoader
		loader.LoadValue(key, raw)
		if problems := errors.Join(append(loader.Errors, loader.Warnings...)...); problems != nil {
			return nil, fmt.Errorf("devserver: dynamic config %q = %v: %w (keys are the server's dynamic config names, e.g. \"limit.historyCount.suggestContinueAsNew\")",
				name, overrides[name], problems)
		}
		dc[key] = loader.Map[key]
	}
	return dc, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
