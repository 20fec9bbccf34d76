package fakegithub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
)

// maxBody bounds a request body; GitHub's own limits are far lower for
// these endpoints than anything a test would send.
const maxBody = 1 << 20

// fieldKind is the JSON type a body field must have.
type fieldKind int

const (
	kindString         fieldKind = iota
	kindNullableString           // a string or null
	kindBool
	kindStringList
	kindStringMap // an object of strings
	kindAny
)

var kindNames = map[fieldKind]string{
	kindString:         "string",
	kindNullableString: "string",
	kindBool:           "boolean",
	kindStringList:     "array",
	kindStringMap:      "object",
}

// fields is a decoded JSON object body whose known fields have been
// type-checked; names are matched exactly, as GitHub does (unlike
// encoding/json's case-insensitive struct decoding).
type fields map[string]json.RawMessage

// decodeBody reads a JSON object body and checks the type of each field
// in kinds; unknown fields are ignored, as GitHub ignores them. On a
// problem it answers the request itself: 400 "Problems parsing JSON" for
// bad JSON, 422 "Invalid request." for a field of the wrong type.
func decodeBody(w http.ResponseWriter, r *http.Request, kinds map[string]fieldKind, doc string) (fields, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Message: "Problems parsing JSON", DocURL: doc})
		return nil, false
	}
	f := fields{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return f, true
	}
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		writeError(w, http.StatusBadRequest, apiError{Message: "Problems parsing JSON", DocURL: doc})
		return nil, false
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		kind := kinds[name]
		v, present := f[name]
		if !present || kind == kindAny || typeOK(v, kind) {
			continue
		}
		shown := string(v)
		if shown == "null" {
			shown = "nil"
		}
		writeError(w, http.StatusUnprocessableEntity, apiError{
			Message: fmt.Sprintf("Invalid request.\n\nFor 'properties/%s', %s is not a %s.", name, shown, kindNames[kind]),
			DocURL:  doc,
		})
		return nil, false
	}
	return f, true
}

func typeOK(v json.RawMessage, kind fieldKind) bool {
	switch kind {
	case kindString:
		var s string
		return string(v) != "null" && json.Unmarshal(v, &s) == nil
	case kindNullableString:
		var s *string
		return json.Unmarshal(v, &s) == nil
	case kindBool:
		var b bool
		return string(v) != "null" && json.Unmarshal(v, &b) == nil
	case kindStringList:
		var l []string
		return string(v) != "null" && json.Unmarshal(v, &l) == nil
	case kindStringMap:
		var m map[string]string
		return string(v) != "null" && json.Unmarshal(v, &m) == nil
	}
	return true
}

// str returns a string field; null and absent are both absent.
func (f fields) str(name string) (string, bool) {
	var s *string
	if v, ok := f[name]; !ok || json.Unmarshal(v, &s) != nil || s == nil {
		return "", false
	}
	return *s, true
}

// present reports whether the body has the field at all, null included.
func (f fields) present(name string) bool {
	_, ok := f[name]
	return ok
}

func (f fields) boolean(name string) (bool, bool) {
	var b bool
	v, ok := f[name]
	return b, ok && json.Unmarshal(v, &b) == nil
}

func (f fields) stringList(name string) ([]string, bool) {
	var l []string
	v, ok := f[name]
	if !ok || json.Unmarshal(v, &l) != nil {
		return nil, false
	}
	if l == nil {
		l = []string{}
	}
	return l, true
}

func (f fields) stringMap(name string) (map[string]string, bool) {
	var m map[string]string
	v, ok := f[name]
	return m, ok && json.Unmarshal(v, &m) == nil
}
