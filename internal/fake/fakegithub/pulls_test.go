package fakegithub_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakegithub"
)

func TestCreatePull(t *testing.T) {
	e := newEnv(t)
	r := e.call("POST", "/repos/acme/widgets/pulls", static, map[string]any{
		"title": "Add widgets", "head": "feature", "base": "main",
		"body": "Why: because.", "draft": true, "maintainer_can_modify": false,
	})
	if r.status != http.StatusCreated {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got struct {
		ID                  int64   `json:"id"`
		Number              int     `json:"number"`
		State               string  `json:"state"`
		Title               string  `json:"title"`
		Body                string  `json:"body"`
		Draft               bool    `json:"draft"`
		HTMLURL             string  `json:"html_url"`
		URL                 string  `json:"url"`
		CreatedAt           string  `json:"created_at"`
		UpdatedAt           string  `json:"updated_at"`
		ClosedAt            *string `json:"closed_at"`
		MaintainerCanModify bool    `json:"maintainer_can_modify"`
		User                struct {
			Login string `json:"login"`
		} `json:"user"`
		Head, Base struct {
			Ref, SHA, Label string
		}
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := "2026-12-01T10:00:00Z"
	if got.ID == 0 || got.Number != 1 || got.State != "open" || got.Title != "Add widgets" ||
		got.Body != "Why: because." || !got.Draft || got.MaintainerCanModify || got.ClosedAt != nil ||
		got.HTMLURL != "https://github.example/acme/widgets/pull/1" ||
		got.URL != "http://example.com/repos/acme/widgets/pulls/1" ||
		got.CreatedAt != want || got.UpdatedAt != want || got.User.Login != "token-user" {
		t.Errorf("pull request = %+v", got)
	}
	if got.Head.Ref != "feature" || got.Head.Label != "acme:feature" || got.Head.SHA != "bbbb000000000000000000000000000000000002" ||
		got.Base.Ref != "main" || got.Base.Label != "acme:main" || got.Base.SHA != "aaaa000000000000000000000000000000000001" {
		t.Errorf("head %+v, base %+v", got.Head, got.Base)
	}
	if loc := r.header.Get("Location"); loc != got.URL {
		t.Errorf("Location = %q", loc)
	}
	wantPRs := []fakegithub.PR{{
		Number: 1, Repo: "acme/widgets", Title: "Add widgets", Body: "Why: because.",
		Head: "feature", Base: "main", HeadSHA: "bbbb000000000000000000000000000000000002", State: "open", Draft: true,
	}}
	if prs := e.srv.PRs("acme/widgets"); !reflect.DeepEqual(prs, wantPRs) {
		t.Errorf("PRs = %+v", prs)
	}
	// Numbers count per repository; "owner:branch" names the same head.
	if n := e.openPR(static, "acme:release", "main"); n != 2 {
		t.Errorf("second number = %d", n)
	}
	if prs := e.srv.PRs("acme/other"); len(prs) != 0 {
		t.Errorf("PRs of another repo = %+v", prs)
	}
}

func TestCreatePullWithoutBodyHasNullBody(t *testing.T) {
	e := newEnv(t)
	r := e.call("POST", "/repos/acme/widgets/pulls", static, map[string]any{"title": "t", "head": "feature", "base": "main"})
	if m := r.json(t); r.status != 201 || m["body"] != nil || m["draft"] != false {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestCreatePullValidation(t *testing.T) {
	type fe = map[string]any
	for _, tc := range []struct {
		name   string
		body   any
		status int
		msg    string
		errors []fe
	}{
		{"missing title", fe{"head": "feature", "base": "main"}, 422, "Validation Failed",
			[]fe{{"resource": "PullRequest", "field": "title", "code": "missing_field"}}},
		{"empty body", "", 422, "Validation Failed", []fe{
			{"resource": "PullRequest", "field": "title", "code": "missing_field"},
			{"resource": "PullRequest", "field": "head", "code": "missing_field"},
			{"resource": "PullRequest", "field": "base", "code": "missing_field"},
		}},
		{"head not pushed", fe{"title": "t", "head": "nope", "base": "main"}, 422, "Validation Failed",
			[]fe{{"resource": "PullRequest", "field": "head", "code": "invalid"}}},
		{"head in another owner's fork", fe{"title": "t", "head": "someone:feature", "base": "main"}, 422, "Validation Failed",
			[]fe{{"resource": "PullRequest", "field": "head", "code": "invalid"}}},
		{"base missing", fe{"title": "t", "head": "feature", "base": "nope"}, 422, "Validation Failed",
			[]fe{{"resource": "PullRequest", "field": "base", "code": "invalid"}}},
		{"no commits", fe{"title": "t", "head": "main", "base": "main"}, 422, "Validation Failed",
			[]fe{{"resource": "PullRequest", "code": "custom", "message": "No commits between main and main"}}},
		{"title not a string", fe{"title": 5, "head": "feature", "base": "main"}, 422,
			"Invalid request.\n\nFor 'properties/title', 5 is not a string.", nil},
		{"draft not a boolean", fe{"title": "t", "head": "feature", "base": "main", "draft": "yes"}, 422,
			"Invalid request.\n\nFor 'properties/draft', \"yes\" is not a boolean.", nil},
		{"title null", fe{"title": nil, "head": "feature", "base": "main"}, 422,
			"Invalid request.\n\nFor 'properties/title', nil is not a string.", nil},
		{"not JSON", "{title:", 400, "Problems parsing JSON", nil},
		{"not an object", "[1]", 400, "Problems parsing JSON", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.call("POST", "/repos/acme/widgets/pulls", static, tc.body)
			if r.status != tc.status || r.message(t) != tc.msg {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var errs []fe
			if raw, ok := r.json(t)["errors"].([]any); ok {
				for _, x := range raw {
					errs = append(errs, x.(map[string]any))
				}
			}
			if !reflect.DeepEqual(errs, tc.errors) {
				t.Errorf("errors = %v, want %v", errs, tc.errors)
			}
			if doc := r.json(t)["documentation_url"]; doc != "https://docs.github.com/rest/pulls/pulls#create-a-pull-request" {
				t.Errorf("documentation_url = %v", doc)
			}
			if len(e.srv.PRs("acme/widgets")) != 0 {
				t.Error("a pull request was created")
			}
		})
	}
}

func TestCreatePullAlreadyExists(t *testing.T) {
	e := newEnv(t)
	e.openPR(static, "feature", "main")
	for _, head := range []string{"feature", "acme:feature"} {
		r := e.call("POST", "/repos/acme/widgets/pulls", static, map[string]any{"title": "again", "head": head, "base": "main"})
		errs, _ := r.json(t)["errors"].([]any)
		if r.status != 422 || len(errs) != 1 || !reflect.DeepEqual(errs[0], map[string]any{
			"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:feature.",
		}) {
			t.Errorf("head %q: %d %s", head, r.status, r.body)
		}
	}
	// GitHub allows one open pull request per head and base, so another
	// base is fine, and so is the same pair once the first is closed.
	e.openPR(static, "feature", "release")
	if r := e.call("PATCH", "/repos/acme/widgets/pulls/1", static, map[string]any{"state": "closed"}); r.status != 200 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if n := e.openPR(static, "feature", "main"); n != 3 {
		t.Errorf("number = %d", n)
	}
}

func TestCrossForkHead(t *testing.T) {
	e := newEnv(t)
	e.setBranch("someone/widgets", "fix", "dddd000000000000000000000000000000000004")
	r := e.call("POST", "/repos/acme/widgets/pulls", static, map[string]any{"title": "t", "head": "someone:fix", "base": "main"})
	var got struct {
		Head struct{ Label, Ref, SHA string }
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 201 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got.Head.Label != "someone:fix" || got.Head.Ref != "fix" || got.Head.SHA != "dddd000000000000000000000000000000000004" {
		t.Errorf("head = %+v", got.Head)
	}
}

// listNumbers lists pull requests with query and returns their numbers.
func listNumbers(t *testing.T, e *env, query string) []int {
	t.Helper()
	r := e.call("GET", "/repos/acme/widgets/pulls"+query, static, nil)
	if r.status != 200 {
		t.Fatalf("list %s: %d %s", query, r.status, r.body)
	}
	var prs []struct{ Number int }
	if err := json.Unmarshal(r.body, &prs); err != nil {
		t.Fatal(err)
	}
	nums := []int{}
	for _, p := range prs {
		nums = append(nums, p.Number)
	}
	return nums
}

func TestListPulls(t *testing.T) {
	e := newEnv(t)
	if got := listNumbers(t, e, ""); len(got) != 0 {
		t.Errorf("empty list = %v", got)
	}
	if r := e.call("GET", "/repos/acme/widgets/pulls", static, nil); string(r.body) != "[]\n" {
		t.Errorf("empty list body = %q, want []", r.body)
	}
	e.openPR(static, "feature", "main") // 1
	e.openPR(static, "release", "main") // 2
	e.openPR(static, "feature", "release")
	e.call("PATCH", "/repos/acme/widgets/pulls/3", static, map[string]any{"state": "closed"})

	for _, tc := range []struct {
		query string
		want  []int
	}{
		{"", []int{2, 1}},
		{"?state=open", []int{2, 1}},
		{"?state=closed", []int{3}},
		{"?state=all", []int{3, 2, 1}},
		{"?head=acme:feature", []int{1}},
		{"?head=acme%3Afeature&state=all", []int{3, 1}},
		{"?head=ACME:feature", []int{1}},
		{"?head=other:feature", []int{}},
		// GitHub ignores a head without its owner prefix.
		{"?head=feature", []int{2, 1}},
		{"?head=feature&state=all", []int{3, 2, 1}},
		{"?base=release&state=all", []int{3}},
		{"?head=acme:release&base=main", []int{2}},
		{"?state=all&per_page=2", []int{3, 2}},
		{"?state=all&per_page=2&page=2", []int{1}},
		{"?state=all&per_page=2&page=3", []int{}},
	} {
		if got := listNumbers(t, e, tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("list %s = %v, want %v", tc.query, got, tc.want)
		}
	}
	if r := e.call("GET", "/repos/acme/widgets/pulls?state=merged", static, nil); r.status != 422 {
		t.Errorf("state=merged: %d %s", r.status, r.body)
	}
}

func TestGetPullRefreshesHead(t *testing.T) {
	e := newEnv(t)
	e.openPR(static, "feature", "main")
	get := func() (int, map[string]any) {
		r := e.call("GET", "/repos/acme/widgets/pulls/1", static, nil)
		return r.status, r.json(t)
	}
	status, m := get()
	if status != 200 || m["number"] != float64(1) || m["title"] != "T feature" {
		t.Fatalf("%d %v", status, m)
	}
	e.setBranch("acme/widgets", "feature", "eeee000000000000000000000000000000000005")
	_, m = get()
	if sha := m["head"].(map[string]any)["sha"]; sha != "eeee000000000000000000000000000000000005" {
		t.Errorf("head sha after a push = %v", sha)
	}
	if prs := e.srv.PRs("acme/widgets"); prs[0].HeadSHA != "eeee000000000000000000000000000000000005" {
		t.Errorf("PRs head sha = %s", prs[0].HeadSHA)
	}
	for _, path := range []string{"/repos/acme/widgets/pulls/2", "/repos/acme/widgets/pulls/x", "/repos/acme/widgets/pulls/0", "/repos/acme/other/pulls/1"} {
		if r := e.call("GET", path, static, nil); r.status != 404 || r.message(t) != "Not Found" {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
}

func TestUpdatePull(t *testing.T) {
	e := newEnv(t)
	e.openPR(static, "feature", "main")
	e.clock.Advance(time.Minute)
	r := e.call("PATCH", "/repos/acme/widgets/pulls/1", static, map[string]any{
		"title": "New title", "body": "New body", "base": "release", "draft": true, "maintainer_can_modify": false,
	})
	m := r.json(t)
	if r.status != 200 || m["title"] != "New title" || m["body"] != "New body" || m["draft"] != false ||
		m["maintainer_can_modify"] != false || m["updated_at"] != "2026-12-01T10:01:00Z" || m["created_at"] != "2026-12-01T10:00:00Z" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if base := m["base"].(map[string]any); base["ref"] != "release" || base["sha"] != "cccc000000000000000000000000000000000003" {
		t.Errorf("base = %v", base)
	}
	r = e.call("PATCH", "/repos/acme/widgets/pulls/1", static, map[string]any{"state": "closed", "body": nil})
	if m := r.json(t); r.status != 200 || m["state"] != "closed" || m["closed_at"] != "2026-12-01T10:01:00Z" || m["body"] != nil || m["title"] != "New title" {
		t.Errorf("close: %d %s", r.status, r.body)
	}
	want := []fakegithub.PR{{Number: 1, Repo: "acme/widgets", Title: "New title", Head: "feature", Base: "release",
		HeadSHA: "bbbb000000000000000000000000000000000002", State: "closed"}}
	if prs := e.srv.PRs("acme/widgets"); !reflect.DeepEqual(prs, want) {
		t.Errorf("PRs = %+v", prs)
	}

	for _, tc := range []struct {
		name  string
		path  string
		body  any
		field string
	}{
		{"bad state", "/repos/acme/widgets/pulls/1", map[string]any{"state": "merged"}, "state"},
		{"missing base", "/repos/acme/widgets/pulls/1", map[string]any{"base": "nope"}, "base"},
	} {
		r := e.call("PATCH", tc.path, static, tc.body)
		errs, _ := r.json(t)["errors"].([]any)
		if r.status != 422 || len(errs) != 1 || errs[0].(map[string]any)["field"] != tc.field {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if r := e.call("PATCH", "/repos/acme/widgets/pulls/9", static, map[string]any{"title": "x"}); r.status != 404 {
		t.Errorf("unknown number: %d", r.status)
	}
	// Reopening collides with a newer open pull request of the same pair.
	e.openPR(static, "feature", "release")
	r = e.call("PATCH", "/repos/acme/widgets/pulls/1", static, map[string]any{"state": "open"})
	if r.status != 422 || !strings.Contains(string(r.body), "A pull request already exists for acme:feature.") {
		t.Errorf("reopen: %d %s", r.status, r.body)
	}
}
