package fakegithub

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pull is a pull request; every field is guarded by Server.mu.
type pull struct {
	id                 int64
	number             int
	owner, name        string
	title              string
	body               *string // nil: null, as GitHub shows a missing body
	headOwner, headRef string
	headSHA            string
	baseRef, baseSHA   string
	state              string
	draft, canModify   bool
	login              string
	created, updated   time.Time
	closed             time.Time
}

func (p *pull) repo() string     { return p.owner + "/" + p.name }
func (p *pull) headRepo() string { return p.headOwner + "/" + p.name }
func (p *pull) label() string    { return p.headOwner + ":" + p.headRef }

type userJSON struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type repoJSON struct {
	Name     string   `json:"name"`
	FullName string   `json:"full_name"`
	Owner    userJSON `json:"owner"`
}

type branchJSON struct {
	Label string   `json:"label"`
	Ref   string   `json:"ref"`
	SHA   string   `json:"sha"`
	User  userJSON `json:"user"`
	Repo  repoJSON `json:"repo"`
}

// pullJSON is the pull-request object of GitHub's REST API, the fields a
// client is likely to read.
type pullJSON struct {
	URL                 string     `json:"url"`
	ID                  int64      `json:"id"`
	NodeID              string     `json:"node_id"`
	HTMLURL             string     `json:"html_url"`
	Number              int        `json:"number"`
	State               string     `json:"state"`
	Locked              bool       `json:"locked"`
	Title               string     `json:"title"`
	User                userJSON   `json:"user"`
	Body                *string    `json:"body"`
	CreatedAt           string     `json:"created_at"`
	UpdatedAt           string     `json:"updated_at"`
	ClosedAt            *string    `json:"closed_at"`
	MergedAt            *string    `json:"merged_at"`
	Draft               bool       `json:"draft"`
	Head                branchJSON `json:"head"`
	Base                branchJSON `json:"base"`
	MaintainerCanModify bool       `json:"maintainer_can_modify"`
	Merged              bool       `json:"merged"`
}

func userOf(login string) userJSON {
	if strings.HasSuffix(login, "[bot]") {
		return userJSON{Login: login, Type: "Bot"}
	}
	return userJSON{Login: login, Type: "User"}
}

func stamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// render returns p as GitHub shows it; the caller holds s.mu.
func (s *Server) render(r *http.Request, p *pull) pullJSON {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	j := pullJSON{
		URL:     fmt.Sprintf("%s://%s/repos/%s/pulls/%d", scheme, r.Host, p.repo(), p.number),
		ID:      p.id,
		NodeID:  fmt.Sprintf("PR_fake%d", p.id),
		HTMLURL: fmt.Sprintf("%s/%s/pull/%d", strings.TrimRight(s.opts.HTMLBase, "/"), p.repo(), p.number),
		Number:  p.number,
		State:   p.state,
		Title:   p.title,
		User:    userOf(p.login),
		Body:    p.body,
		Draft:   p.draft,
		Head: branchJSON{
			Label: p.label(), Ref: p.headRef, SHA: p.headSHA, User: userOf(p.headOwner),
			Repo: repoJSON{Name: p.name, FullName: p.headRepo(), Owner: userOf(p.headOwner)},
		},
		Base: branchJSON{
			Label: p.owner + ":" + p.baseRef, Ref: p.baseRef, SHA: p.baseSHA, User: userOf(p.owner),
			Repo: repoJSON{Name: p.name, FullName: p.repo(), Owner: userOf(p.owner)},
		},
		MaintainerCanModify: p.canModify,
		CreatedAt:           stamp(p.created),
		UpdatedAt:           stamp(p.updated),
	}
	if p.state == "closed" {
		c := stamp(p.closed)
		j.ClosedAt = &c
	}
	return j
}

// refresh reads the branches of p again, outside the lock: Branch may be
// slow (a git process) and is the test's code.
func (s *Server) refresh(p *pull) {
	s.mu.Lock()
	repo, headRepo, headRef, baseRef := p.repo(), p.headRepo(), p.headRef, p.baseRef
	s.mu.Unlock()
	headSHA, headOK := s.branch(headRepo, headRef)
	baseSHA, baseOK := s.branch(repo, baseRef)
	s.mu.Lock()
	if headOK {
		p.headSHA = headSHA
	}
	if baseOK {
		p.baseSHA = baseSHA
	}
	s.mu.Unlock()
}

// openConflict returns an open pull request other than except with the
// same head label and base; the caller holds s.mu.
func (s *Server) openConflict(repo, label, base string, except *pull) *pull {
	for _, p := range s.pulls[repo] {
		if p != except && p.state == "open" && strings.EqualFold(p.label(), label) && p.baseRef == base {
			return p
		}
	}
	return nil
}

func alreadyExists(w http.ResponseWriter, doc, label string) {
	validationFailed(w, doc, fieldError{
		Resource: "PullRequest", Code: "custom",
		Message: fmt.Sprintf("A pull request already exists for %s.", label),
	})
}

// createPull serves POST /repos/{owner}/{repo}/pulls.
func (s *Server) createPull(w http.ResponseWriter, r *http.Request) {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	repo := owner + "/" + name
	login, ok := s.authRepo(w, r, name, true, docCreate)
	if !ok {
		return
	}
	f, ok := decodeBody(w, r, map[string]fieldKind{
		"title": kindString, "head": kindString, "base": kindString,
		"body": kindNullableString, "draft": kindBool, "maintainer_can_modify": kindBool,
		"head_repo": kindString, "issue": kindAny,
	}, docCreate)
	if !ok {
		return
	}
	title, _ := f.str("title")
	head, _ := f.str("head")
	base, _ := f.str("base")
	var missing []fieldError
	for _, kv := range [][2]string{{"title", title}, {"head", head}, {"base", base}} {
		if kv[1] == "" {
			missing = append(missing, fieldError{Resource: "PullRequest", Field: kv[0], Code: "missing_field"})
		}
	}
	if len(missing) > 0 {
		validationFailed(w, docCreate, missing...)
		return
	}
	headOwner, headRef := owner, head
	if o, b, ok := strings.Cut(head, ":"); ok {
		headOwner, headRef = o, b
	}
	headSHA, headOK := s.branch(headOwner+"/"+name, headRef)
	baseSHA, baseOK := s.branch(repo, base)
	var invalid []fieldError
	if !headOK {
		invalid = append(invalid, fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
	}
	if !baseOK {
		invalid = append(invalid, fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
	}
	if len(invalid) > 0 {
		validationFailed(w, docCreate, invalid...)
		return
	}
	if headSHA == baseSHA {
		validationFailed(w, docCreate, fieldError{
			Resource: "PullRequest", Code: "custom",
			Message: fmt.Sprintf("No commits between %s and %s", base, head),
		})
		return
	}
	p := &pull{
		owner: owner, name: name, title: title,
		headOwner: headOwner, headRef: headRef, headSHA: headSHA,
		baseRef: base, baseSHA: baseSHA,
		state: "open", canModify: true, login: login,
	}
	if body, ok := f.str("body"); ok {
		p.body = &body
	}
	p.draft, _ = f.boolean("draft")
	if v, ok := f.boolean("maintainer_can_modify"); ok {
		p.canModify = v
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.openConflict(repo, p.label(), base, nil) != nil {
		alreadyExists(w, docCreate, p.label())
		return
	}
	s.nextID++
	p.id = s.nextID
	p.number = len(s.pulls[repo]) + 1
	p.created = s.now()
	p.updated = p.created
	s.pulls[repo] = append(s.pulls[repo], p)
	j := s.render(r, p)
	w.Header().Set("Location", j.URL)
	writeJSON(w, http.StatusCreated, j)
}

// listPulls serves GET /repos/{owner}/{repo}/pulls: state (open, closed,
// all; default open), head ("owner:branch"; a bare branch name is ignored,
// as GitHub ignores it), base, per_page (default 30, at most 100) and
// page, newest first.
func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	repo := owner + "/" + name
	if _, ok := s.authRepo(w, r, name, false, docList); !ok {
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		validationFailed(w, docList, fieldError{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	head := q.Get("head")
	if !strings.Contains(head, ":") {
		head = ""
	}
	base := q.Get("base")
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage < 1 {
		perPage = 30
	}
	perPage = min(perPage, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}

	s.mu.Lock()
	var match []*pull
	for _, p := range slices.Backward(s.pulls[repo]) {
		if (state == "all" || p.state == state) &&
			(head == "" || strings.EqualFold(p.label(), head)) &&
			(base == "" || p.baseRef == base) {
			match = append(match, p)
		}
	}
	s.mu.Unlock()
	start := min((page-1)*perPage, len(match))
	match = match[start:min(start+perPage, len(match))]
	for _, p := range match {
		s.refresh(p)
	}
	out := make([]pullJSON, 0, len(match))
	s.mu.Lock()
	for _, p := range match {
		out = append(out, s.render(r, p))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// findPull resolves {number} of the request or answers 404.
func (s *Server) findPull(w http.ResponseWriter, r *http.Request, doc string) *pull {
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	n, err := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || n < 1 || n > len(s.pulls[repo]) {
		writeError(w, http.StatusNotFound, apiError{Message: "Not Found", DocURL: doc})
		return nil
	}
	return s.pulls[repo][n-1]
}

// getPull serves GET /repos/{owner}/{repo}/pulls/{number}.
func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authRepo(w, r, r.PathValue("repo"), false, docGet); !ok {
		return
	}
	p := s.findPull(w, r, docGet)
	if p == nil {
		return
	}
	s.refresh(p)
	s.mu.Lock()
	j := s.render(r, p)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, j)
}

// updatePull serves PATCH /repos/{owner}/{repo}/pulls/{number}: title,
// body, state (open or closed), base and maintainer_can_modify. Like
// GitHub it ignores draft and every other field.
func (s *Server) updatePull(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authRepo(w, r, r.PathValue("repo"), true, docUpdate); !ok {
		return
	}
	p := s.findPull(w, r, docUpdate)
	if p == nil {
		return
	}
	f, ok := decodeBody(w, r, map[string]fieldKind{
		"title": kindString, "body": kindNullableString, "state": kindString,
		"base": kindString, "maintainer_can_modify": kindBool,
	}, docUpdate)
	if !ok {
		return
	}
	state, hasState := f.str("state")
	if hasState && state != "open" && state != "closed" {
		validationFailed(w, docUpdate, fieldError{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	base, hasBase := f.str("base")
	var baseSHA string
	if hasBase {
		var ok bool
		if baseSHA, ok = s.branch(r.PathValue("owner")+"/"+r.PathValue("repo"), base); !ok {
			validationFailed(w, docUpdate, fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
			return
		}
	}
	s.refresh(p)

	s.mu.Lock()
	defer s.mu.Unlock()
	newState, newBase := p.state, p.baseRef
	if hasState {
		newState = state
	}
	if hasBase {
		newBase = base
	}
	if newState == "open" && s.openConflict(p.repo(), p.label(), newBase, p) != nil {
		alreadyExists(w, docUpdate, p.label())
		return
	}
	if title, ok := f.str("title"); ok {
		p.title = title
	}
	if f.present("body") {
		if body, ok := f.str("body"); ok {
			p.body = &body
		} else {
			p.body = nil
		}
	}
	if v, ok := f.boolean("maintainer_can_modify"); ok {
		p.canModify = v
	}
	if hasBase {
		p.baseRef, p.baseSHA = base, baseSHA
	}
	p.updated = s.now()
	if newState == "closed" && p.state != "closed" {
		p.closed = p.updated
	}
	p.state = newState
	writeJSON(w, http.StatusOK, s.render(r, p))
}

// PRs returns every pull request of repo ("owner/name"), by number, with
// head SHAs read again from Options.Branch.
func (s *Server) PRs(repo string) []PR {
	s.mu.Lock()
	list := slices.Clone(s.pulls[repo])
	s.mu.Unlock()
	out := make([]PR, 0, len(list))
	for _, p := range list {
		s.refresh(p)
		s.mu.Lock()
		pr := PR{
			Number: p.number, Repo: p.repo(), Title: p.title,
			Head: p.headRef, Base: p.baseRef, HeadSHA: p.headSHA,
			State: p.state, Draft: p.draft,
		}
		if p.body != nil {
			pr.Body = *p.body
		}
		s.mu.Unlock()
		out = append(out, pr)
	}
	return out
}
