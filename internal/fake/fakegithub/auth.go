package fakegithub

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limits GitHub puts on an App's JWT and its installation tokens.
const (
	maxJWTLifetime = 10 * time.Minute
	maxClockSkew   = 60 * time.Second
	tokenLifetime  = time.Hour
)

// JWT rejection messages, worded as GitHub words them.
const (
	msgJWTDecode = "A JSON web token could not be decoded"
	msgJWTExp    = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	msgJWTExpFar = "'Expiration time' claim ('exp') is too far in the future"
	msgJWTIat    = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	msgJWTIss    = "'Issuer' claim ('iss') does not match a GitHub App"
)

// Logins the pull requests are attributed to.
const (
	staticLogin = "token-user"
	appLogin    = "fake-app[bot]"
)

// installPermissions are what the installation was granted; a token may
// ask for less.
var installPermissions = map[string]string{
	"contents":      "write",
	"metadata":      "read",
	"pull_requests": "write",
}

// installToken is a minted installation token.
type installToken struct {
	expires time.Time
	repos   []string          // names it is limited to; nil: all
	perms   map[string]string // permission → "read" | "write"
}

// ValidToken reports whether tok is a static token or an unexpired
// installation token, so a fakegit.Options.Token can accept for git the
// same tokens the API accepts.
func (s *Server) ValidToken(tok string) bool {
	_, ok := s.lookupToken(tok)
	return ok
}

// credential is who a token authenticates.
type credential struct {
	login string
	inst  *installToken // nil for a static token
}

func (s *Server) lookupToken(tok string) (credential, bool) {
	if tok == "" {
		return credential{}, false
	}
	for _, t := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			return credential{login: staticLogin}, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.minted[tok]
	if !ok || !s.now().Before(it.expires) {
		return credential{}, false
	}
	return credential{login: appLogin, inst: it}, true
}

// authToken returns the token of an "Authorization: Bearer X" or
// "token X" header.
func authToken(r *http.Request, bearerOnly bool) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return "", false
	}
	if strings.EqualFold(scheme, "Bearer") || (!bearerOnly && strings.EqualFold(scheme, "token")) {
		return tok, true
	}
	return "", false
}

// authRepo authenticates a /repos request for owner/name and, when it
// fails, answers it the way GitHub does; write asks for pull-request
// write access.
func (s *Server) authRepo(w http.ResponseWriter, r *http.Request, name string, write bool, doc string) (login string, ok bool) {
	if r.Header.Get("Authorization") == "" {
		writeError(w, http.StatusUnauthorized, apiError{Message: "Requires authentication", DocURL: doc})
		return "", false
	}
	tok, ok := authToken(r, false)
	cred, valid := s.lookupToken(tok)
	if !ok || !valid {
		writeError(w, http.StatusUnauthorized, apiError{Message: "Bad credentials", DocURL: docRoot})
		return "", false
	}
	if it := cred.inst; it != nil {
		if it.repos != nil && !containsFold(it.repos, name) {
			// GitHub does not tell a token about repositories it cannot see.
			writeError(w, http.StatusNotFound, apiError{Message: "Not Found", DocURL: doc})
			return "", false
		}
		need := "read"
		if write {
			need = "write"
		}
		if !levelCovers(it.perms["pull_requests"], need) {
			w.Header().Set("X-Accepted-GitHub-Permissions", "pull_requests="+need)
			writeError(w, http.StatusForbidden, apiError{Message: "Resource not accessible by integration", DocURL: doc})
			return "", false
		}
	}
	return cred.login, true
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// levelCovers reports whether a granted permission level allows need.
func levelCovers(have, need string) bool {
	return have == "write" || (have == "read" && need == "read")
}

// createAccessToken serves POST /app/installations/{id}/access_tokens.
func (s *Server) createAccessToken(w http.ResponseWriter, r *http.Request) {
	jwt, ok := authToken(r, true)
	if !ok {
		writeError(w, http.StatusUnauthorized, apiError{Message: msgJWTDecode, DocURL: docRoot})
		return
	}
	if msg := s.verifyJWT(jwt); msg != "" {
		writeError(w, http.StatusUnauthorized, apiError{Message: msg, DocURL: docRoot})
		return
	}
	id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
	if err != nil || id != s.opts.InstallationID {
		writeError(w, http.StatusNotFound, apiError{Message: "Not Found", DocURL: docAccessToken})
		return
	}
	f, ok := decodeBody(w, r, map[string]fieldKind{
		"repositories":   kindStringList,
		"repository_ids": kindAny,
		"permissions":    kindStringMap,
	}, docAccessToken)
	if !ok {
		return
	}
	perms := installPermissions
	if asked, ok := f.stringMap("permissions"); ok {
		for p, level := range asked {
			if !levelCovers(installPermissions[p], level) {
				writeError(w, http.StatusUnprocessableEntity, apiError{
					Message: "The permissions requested are not granted to this installation.",
					DocURL:  docAccessToken,
				})
				return
			}
		}
		perms = asked
	}
	repos, _ := f.stringList("repositories")
	tok := "ghs_" + rand.Text() + rand.Text()[:10]
	expires := s.now().Add(tokenLifetime).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.minted[tok] = &installToken{expires: expires, repos: repos, perms: perms}
	s.mu.Unlock()

	resp := map[string]any{
		"token":                tok,
		"expires_at":           expires.Format(time.RFC3339),
		"permissions":          perms,
		"repository_selection": "all",
	}
	if repos != nil {
		resp["repository_selection"] = "selected"
		var list []map[string]string
		for _, name := range repos {
			list = append(list, map[string]string{"name": name})
		}
		resp["repositories"] = list
	}
	writeJSON(w, http.StatusCreated, resp)
}

// verifyJWT checks an App JWT and returns "" or GitHub's reason for
// refusing it. The signature is checked before any claim, so an unsigned
// token learns nothing about the claims it would need.
func (s *Server) verifyJWT(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || s.opts.AppKey == nil {
		return msgJWTDecode
	}
	var header struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if !decodeSegment(parts[0], &header) || header.Alg != "RS256" || (header.Typ != "" && header.Typ != "JWT") {
		return msgJWTDecode
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return msgJWTDecode
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(s.opts.AppKey, crypto.SHA256, sum[:], sig) != nil {
		return msgJWTDecode
	}
	var claims struct {
		Iat json.RawMessage `json:"iat"`
		Exp json.RawMessage `json:"exp"`
		Iss json.RawMessage `json:"iss"`
	}
	if !decodeSegment(parts[1], &claims) {
		return msgJWTDecode
	}
	if iss, ok := issuer(claims.Iss); !ok || iss != s.opts.AppID {
		return msgJWTIss
	}
	now := s.now()
	iat, ok := unixClaim(claims.Iat)
	if !ok || iat.After(now.Add(maxClockSkew)) {
		return msgJWTIat
	}
	exp, ok := unixClaim(claims.Exp)
	if !ok || !exp.After(now) {
		return msgJWTExp
	}
	if exp.Sub(iat) > maxJWTLifetime {
		return msgJWTExpFar
	}
	return ""
}

func decodeSegment(seg string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && json.Unmarshal(b, v) == nil
}

// issuer reads iss, which GitHub accepts as the App ID (a number or a
// string) or the client ID (a string).
func issuer(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	if n, ok := unixInt(raw); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// unixClaim reads an integer NumericDate claim.
func unixClaim(raw json.RawMessage) (time.Time, bool) {
	n, ok := unixInt(raw)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

func unixInt(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}
