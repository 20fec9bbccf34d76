package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestOpenWithStaticToken(t *testing.T) {
	h := newHarness(t)
	c := h.client(StaticToken(static))
	p, created, err := c.OpenOrUpdate(context.Background(), "acme", "widgets", NewPullRequest{
		Title: "Add x", Head: "sandbot/x", Base: "main", Body: "Because.", Draft: true,
	})
	if err != nil || !created {
		t.Fatalf("OpenOrUpdate = %v, %v", created, err)
	}
	want := PullRequest{
		Number: 1, URL: "https://github.example/acme/widgets/pull/1", State: "open",
		Title: "Add x", Body: "Because.", Draft: true,
		Head: Branch{Ref: "sandbot/x", SHA: headSHA}, Base: Branch{Ref: "main", SHA: mainSHA},
	}
	if p != want {
		t.Errorf("pull request = %+v\nwant %+v", p, want)
	}
	for _, hdr := range h.recorded() {
		for k, v := range map[string]string{
			"Authorization":        "Bearer " + static,
			"Accept":               "application/vnd.github+json",
			"X-Github-Api-Version": "2022-11-28",
			"User-Agent":           "sandbot",
			"Content-Type":         "application/json",
		} {
			if got := hdr.Get(k); got != v {
				t.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
	}
	if got := h.fake.Calls(); !slices.Equal(got, []string{"POST /repos/acme/widgets/pulls 201"}) {
		t.Errorf("calls = %q", got)
	}
}

func TestOpenOrUpdateUpdatesTheOpenPullRequest(t *testing.T) {
	h := newHarness(t)
	c := h.client(StaticToken(static))
	ctx := context.Background()
	first, created, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "v1", Head: "sandbot/x", Base: "main", Body: "b1"})
	if err != nil || !created {
		t.Fatalf("first: %v, %v", created, err)
	}
	second, created, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "v2", Head: "sandbot/x", Base: "main", Body: "b2"})
	if err != nil || created {
		t.Fatalf("second: created=%v, %v", created, err)
	}
	if second.Number != first.Number || second.Title != "v2" || second.Body != "b2" || second.URL != first.URL {
		t.Errorf("second = %+v", second)
	}
	prs := h.fake.PRs("acme/widgets")
	if len(prs) != 1 || prs[0].Title != "v2" || prs[0].Body != "b2" || prs[0].State != "open" {
		t.Errorf("fake holds %+v", prs)
	}
	want := []string{
		"POST /repos/acme/widgets/pulls 201",
		"POST /repos/acme/widgets/pulls 422",
		// The owner prefix is what makes GitHub filter at all.
		"GET /repos/acme/widgets/pulls?base=main&head=acme%3Asandbot%2Fx&state=open 200",
		"PATCH /repos/acme/widgets/pulls/1 200",
	}
	if got := h.fake.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls = %q\nwant    %q", got, want)
	}

	// Another head is another pull request, even while the first is open.
	other, created, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "y", Head: "acme:sandbot/y", Base: "main"})
	if err != nil || !created || other.Number != 2 {
		t.Errorf("other head: %+v, %v, %v", other, created, err)
	}
}

func TestOpenAfterTheOldOneWasClosed(t *testing.T) {
	h := newHarness(t)
	c := h.client(StaticToken(static))
	ctx := context.Background()
	if _, _, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "v1", Head: "sandbot/x", Base: "main"}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PATCH", h.srv.URL+"/repos/acme/widgets/pulls/1", strings.NewReader(`{"state":"closed"}`))
	req.Header.Set("Authorization", "token "+static)
	req.Header.Set("User-Agent", "test")
	resp, err := h.srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("close: %v %v", resp, err)
	}
	resp.Body.Close()
	p, created, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "v2", Head: "sandbot/x", Base: "main"})
	if err != nil || !created || p.Number != 2 {
		t.Errorf("after close: %+v, %v, %v", p, created, err)
	}
}

func TestHeadNotPushed(t *testing.T) {
	h := newHarness(t)
	_, _, err := h.client(StaticToken(static)).OpenOrUpdate(context.Background(), "acme", "widgets",
		NewPullRequest{Title: "t", Head: "sandbot/never-pushed", Base: "main"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *APIError", err)
	}
	if apiErr.Status != 422 || apiErr.Message != "Validation Failed" ||
		!reflect.DeepEqual(apiErr.Errors, []FieldError{{Resource: "PullRequest", Field: "head", Code: "invalid"}}) ||
		apiErr.DocURL != "https://docs.github.com/rest/pulls/pulls#create-a-pull-request" || apiErr.RateLimited() {
		t.Errorf("APIError = %+v", apiErr)
	}
	if want := "GitHub: 422 Validation Failed: PullRequest.head is invalid (POST /repos/acme/widgets/pulls)"; err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	// Nothing else was tried: only "already exists" leads to an update.
	if calls := h.fake.Calls(); len(calls) != 1 {
		t.Errorf("calls = %q", calls)
	}
}

func TestNoCommitsIsAnError(t *testing.T) {
	h := newHarness(t)
	_, _, err := h.client(StaticToken(static)).OpenOrUpdate(context.Background(), "acme", "widgets",
		NewPullRequest{Title: "t", Head: "no-changes", Base: "main"})
	if want := "GitHub: 422 Validation Failed: No commits between main and no-changes (POST /repos/acme/widgets/pulls)"; err == nil || err.Error() != want {
		t.Errorf("error = %v", err)
	}
}

func TestBadTokenErrorHidesTheToken(t *testing.T) {
	h := newHarness(t)
	const secret = "ghp_wrong_secret_987654321"
	c := h.client(StaticToken(secret))
	_, _, err := c.OpenOrUpdate(context.Background(), "acme", "widgets", NewPullRequest{Title: "t", Head: "sandbot/x", Base: "main"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("err = %v", err)
	}
	if want := "GitHub: 401 Bad credentials (POST /repos/acme/widgets/pulls)"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	printed := fmt.Sprintf("%v %+v %#v %v %+v %#v", err, err, err, c, c, c.Tokens)
	if strings.Contains(printed, secret) {
		t.Errorf("the token leaks when printed: %s", printed)
	}
	if _, err := StaticToken("").Token(context.Background()); err == nil {
		t.Error("an empty static token was accepted")
	}
}

func TestGetAndUpdate(t *testing.T) {
	h := newHarness(t)
	c := h.client(StaticToken(static))
	ctx := context.Background()
	if _, _, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "t", Head: "sandbot/x", Base: "main", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Update(ctx, "acme", "widgets", 1, "new title", "new body")
	if err != nil || p.Title != "new title" || p.Body != "new body" || p.Number != 1 {
		t.Fatalf("Update = %+v, %v", p, err)
	}
	h.mu.Lock()
	h.branches["acme/widgets sandbot/x"] = "eeee000000000000000000000000000000000005"
	h.mu.Unlock()
	p, err = c.Get(ctx, "acme", "widgets", 1)
	if err != nil || p.Title != "new title" || p.Head.SHA != "eeee000000000000000000000000000000000005" || p.State != "open" {
		t.Errorf("Get = %+v, %v", p, err)
	}
	_, err = c.Get(ctx, "acme", "widgets", 9)
	if want := "GitHub: 404 Not Found (GET /repos/acme/widgets/pulls/9)"; err == nil || err.Error() != want {
		t.Errorf("Get(9) error = %v", err)
	}
}

func TestBadArgumentsAndCancellation(t *testing.T) {
	h := newHarness(t)
	c := h.client(StaticToken(static))
	for _, or := range [][2]string{{"", "widgets"}, {"acme", ""}, {"acme/x", "widgets"}} {
		if _, _, err := c.OpenOrUpdate(context.Background(), or[0], or[1], NewPullRequest{}); err == nil {
			t.Errorf("OpenOrUpdate(%q, %q) accepted", or[0], or[1])
		}
	}
	if _, err := (&Client{BaseURL: h.srv.URL}).Get(context.Background(), "acme", "widgets", 1); err == nil {
		t.Error("a client without Tokens made a call")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "acme", "widgets", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	if calls := h.fake.Calls(); len(calls) != 0 {
		t.Errorf("calls = %q", calls)
	}
}
