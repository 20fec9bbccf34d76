package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Backends is the set of backends one worker serves, keyed by Name. Build
// it with NewBackends; it is read-only afterwards and safe to share.
type Backends map[string]Backend

// ErrUnknownBackend is returned (wrapped) for a backend name the worker
// does not serve.
var ErrUnknownBackend = errors.New("unknown sandbox backend")

// NewBackends indexes backends by name, refusing nil entries and
// duplicate names.
func NewBackends(bs ...Backend) (Backends, error) {
	out := make(Backends, len(bs))
	for i, b := range bs {
		if b == nil {
			return nil, fmt.Errorf("sandbox: backends: entry %d is nil", i)
		}
		name := b.Name()
		if name == "" {
			return nil, fmt.Errorf("sandbox: backends: entry %d has an empty name", i)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("sandbox: backends: %q registered twice", name)
		}
		out[name] = b
	}
	return out, nil
}

// Names returns the served backend names, sorted.
func (bs Backends) Names() []string {
	names := make([]string, 0, len(bs))
	for name := range bs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Get returns the named backend, or an error wrapping ErrUnknownBackend
// that lists what is served.
func (bs Backends) Get(name string) (Backend, error) {
	if b, ok := bs[name]; ok {
		return b, nil
	}
	served := "none"
	if len(bs) > 0 {
		served = strings.Join(bs.Names(), ", ")
	}
	return nil, fmt.Errorf("%w %q: this worker serves %s", ErrUnknownBackend, name, served)
}
