package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path"
	"runtime"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/internal/app"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/internal/syncbuf"
)

// The soak's pure parts, in plain go test: they need no stack.

// matching is the indexes of the globs (each one or more space-separated
// patterns, as a cat takes them) that match name.
func matching(globs []string, name string) []int {
	var out []int
	for i, g := range globs {
		for p := range strings.FieldsSeq(g) {
			if ok, _ := path.Match(p, ".m/"+name); ok {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// TestMarkerGlobs: the verify chunks match every marker of turns 1..upto
// (retries too) exactly once, no other session's, and none is empty.
func TestMarkerGlobs(t *testing.T) {
	for _, upto := range []int{1, 9, 10, 99, 100, 101, 250, 999, 1000, 1234} {
		globs := markerGlobs("s01", upto)
		used := make([]bool, len(globs))
		for turn := 1; turn <= upto; turn++ {
			for _, tok := range []string{fmt.Sprint(turn), fmt.Sprintf("%dr1", turn), fmt.Sprintf("%dr12", turn)} {
				for c := 1; c <= 4; c++ {
					name := fmt.Sprintf("s01t%sc%d", tok, c)
					if !markerRe.MatchString(name) {
						t.Fatalf("%s is no marker", name)
					}
					m := matching(globs, name)
					if len(m) != 1 {
						t.Fatalf("upto %d: %s matches globs %v of %q", upto, name, m, globs)
					}
					used[m[0]] = true
					if other := matching(globs, strings.Replace(name, "s01", "s02", 1)); len(other) != 0 {
						t.Fatalf("upto %d: another session's %s matches %v", upto, name, other)
					}
				}
			}
		}
		for i, u := range used {
			if !u {
				t.Fatalf("upto %d: glob %q matches no marker", upto, globs[i])
			}
		}
		if want := 1 + upto/100; len(globs) != want {
			t.Fatalf("upto %d: %d chunks, want %d", upto, len(globs), want)
		}
	}
	if g := markerGlobs("s01", 0); g != nil {
		t.Fatalf("no turns: %q", g)
	}
}

// request is a model request whose conversation is msgs.
func request(msgs ...fakeopenai.ChatMessage) fakeopenai.RecordedRequest {
	return fakeopenai.RecordedRequest{Body: fakeopenai.ChatRequest{Messages: msgs}}
}

func user(text string) fakeopenai.ChatMessage {
	return fakeopenai.ChatMessage{Role: "user", Content: text}
}

func toolResult(id, content string) fakeopenai.ChatMessage {
	return fakeopenai.ChatMessage{Role: "tool", ToolCallID: id, Content: content}
}

// command is the single shell command of a step's single call.
func command(t *testing.T, st fakeopenai.Step) (id, cmd string) {
	t.Helper()
	if len(st.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v", st)
	}
	var args struct{ Commands []string }
	if err := json.Unmarshal([]byte(st.ToolCalls[0].Arguments), &args); err != nil || len(args.Commands) != 1 {
		t.Fatalf("arguments %q: %v", st.ToolCalls[0].Arguments, err)
	}
	return st.ToolCalls[0].ID, args.Commands[0]
}

// TestVerifyAskedAgainReadsAnew: a read-back whose reads all failed (the
// Docker daemon down through all of them) is asked again, and the new try's
// reads are its own: with the first try's call IDs it was shown the first
// try's failures (results are kept as they first arrived) and never
// completed.
func TestVerifyAskedAgainReadsAnew(t *testing.T) {
	w := newWorkload(Config{})
	msgs := []fakeopenai.ChatMessage{user("chaos verify s01")}
	failed := "not run: sandbox unavailable on backend \"docker\": daemon not reachable\nexit code: -1"
	for i := range 6 {
		id, cmd := command(t, w.respond(request(msgs...)))
		if cmd != "cat .m/*" || id != fmt.Sprintf("s01verify%d", i+1) {
			t.Fatalf("first try, read %d: %s %q", i+1, id, cmd)
		}
		msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant"}, toolResult(id, failed))
	}
	if st := w.respond(request(msgs...)); st.Content != "chaos verified s01" {
		t.Fatalf("after six failed reads: %+v", st)
	}
	if _, ok := w.verified["s01"]; ok {
		t.Fatal("a read-back whose reads all failed counted as read")
	}
	msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant", Content: "chaos verified s01"}, user("chaos verify s01 try=2"))
	id, cmd := command(t, w.respond(request(msgs...)))
	if cmd != "cat .m/*" || id != "s01verify2-1" {
		t.Fatalf("second try's read: %s %q, want s01verify2-1", id, cmd)
	}
	msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant"}, toolResult(id, "s01t1c1\nexit code: 0"))
	if st := w.respond(request(msgs...)); st.Content != "chaos verified s01" {
		t.Fatalf("after the second try's read: %+v", st)
	}
	if got := w.verified["s01"]; !hasLine(got, "s01t1c1") {
		t.Fatalf("the second try's read did not count: %q", got)
	}
}

// TestVerifyReadsInChunks: "upto=N" reads the markers chunk by chunk, a
// chunk whose read was interrupted again, then the fork markers, and
// records what every completed read printed when it arrived (later
// requests may carry it elided); the plain verify is one cat.
func TestVerifyReadsInChunks(t *testing.T) {
	w := newWorkload(Config{})
	msgs := []fakeopenai.ChatMessage{user("earlier"), user("chaos verify s01 upto=150")}
	ok := func(out string) string { return out + "\nexit code: 0" }
	wantCmds := []string{"cat .m/s01t[0-9][cr]* .m/s01t[0-9][0-9][cr]*", "cat .m/s01t1[0-9][0-9][cr]*", "cat .m/s01t1[0-9][0-9][cr]*", forkMarkerRead}
	results := []string{ok("s01t1c1"), "s01t100c1\n" + "[interrupted]", ok("s01t100c1\ns01t150c2"), ok("")}
	for i, want := range wantCmds {
		id, cmd := command(t, w.respond(request(msgs...)))
		if cmd != want || id != fmt.Sprintf("s01verify%d", i+1) {
			t.Fatalf("read %d: %s %q, want %q", i+1, id, cmd, want)
		}
		msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant"}, toolResult(id, results[i]))
	}
	// A full context elides older tool results (head and tail kept): the
	// chunk counts as it first arrived.
	msgs[3].Content = "s01t…[3 bytes elided]…: 0"
	if st := w.respond(request(msgs...)); st.Content != "chaos verified s01" {
		t.Fatalf("after the last chunk: %+v", st)
	}
	got := w.verified["s01"]
	for _, line := range []string{"s01t1c1", "s01t100c1", "s01t150c2"} {
		if !hasLine(got, line) {
			t.Fatalf("verified output lacks %s: %q", line, got)
		}
	}
	if strings.Contains(got, "interrupted") {
		t.Fatalf("an interrupted read counted: %q", got)
	}

	w = newWorkload(Config{})
	id, cmd := command(t, w.respond(request(user("chaos verify s02"))))
	if cmd != "cat .m/*" {
		t.Fatalf("plain verify: %s %q", id, cmd)
	}
}

// TestTaskOnABackendStartsWithPwd: a task naming its backend runs pwd
// first, then its markers; a fork check reads the parent's marker, then
// writes its own.
func TestTaskOnABackendStartsWithPwd(t *testing.T) {
	w := newWorkload(Config{})
	msgs := []fakeopenai.ChatMessage{user("chaos task s01 t7 n=2 on=docker")}
	for _, want := range []string{"s01t7w pwd", "s01t7c1 " + markerCommand("s01t7c1"), "s01t7c2 " + markerCommand("s01t7c2")} {
		id, cmd := command(t, w.respond(request(msgs...)))
		if id+" "+cmd != want {
			t.Fatalf("got %s %q, want %q", id, cmd, want)
		}
		msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant"}, toolResult(id, "exit code: 0"))
	}
	if st := w.respond(request(msgs...)); st.Content != answer("s01", "t7") {
		t.Fatalf("final: %+v", st)
	}

	msgs = []fakeopenai.ChatMessage{user("chaos forkcheck f02r1 reads s01t40r2c3")}
	for _, want := range []string{"f02r1c1 cd .m && cat s01t40r2c3", "f02r1c2 " + markerCommand("f02r1c2")} {
		id, cmd := command(t, w.respond(request(msgs...)))
		if id+" "+cmd != want {
			t.Fatalf("got %s %q, want %q", id, cmd, want)
		}
		msgs = append(msgs, fakeopenai.ChatMessage{Role: "assistant"}, toolResult(id, "exit code: 0"))
	}
	if st := w.respond(request(msgs...)); st.Content != forkCheckAnswer("f02r1") {
		t.Fatalf("final: %+v", st)
	}
}

func samples(f func(turn int) float64, every, turns int) []MemSample {
	var out []MemSample
	for t := every; t <= turns; t += every {
		out = append(out, MemSample{Turn: t, Bytes: int64(f(t) * (1 << 20))})
	}
	return out
}

// TestMemoryTrend: a flat series with a collector's wobble is stable, a
// steady climb is growing and its slope is measured, a short run's slope
// alone is not enough, and too few samples give no verdict.
func TestMemoryTrend(t *testing.T) {
	wobble := func(turn int) float64 { return 60 + float64(turn%50)/10 - 2.5 }
	flat := memoryTrend(samples(wobble, 25, 1000))
	if flat.Verdict != "stable" || flat.Slope > 1 || flat.Slope < -1 {
		t.Fatalf("flat: %+v", flat)
	}
	climb := memoryTrend(samples(func(turn int) float64 { return 50 + 0.05*float64(turn) }, 25, 1000))
	if climb.Verdict != "growing" || climb.Slope < 4.99 || climb.Slope > 5.01 {
		t.Fatalf("climb of 5 MB per 100 turns: %+v", climb)
	}
	if climb.First != 51<<20+1<<18 || climb.Max != climb.Last || climb.Last != 100<<20 {
		t.Fatalf("first/last/max: %+v", climb)
	}
	// 3 MB per 100 turns over 60 turns is a rise of under 2 MB: noise.
	short := memoryTrend(samples(func(turn int) float64 { return 50 + 0.03*float64(turn) }, 5, 120))
	if short.Verdict != "stable" {
		t.Fatalf("short: %+v", short)
	}
	if few := memoryTrend(samples(wobble, 25, 150)); few.Verdict != "too few samples" {
		t.Fatalf("few: %+v", few)
	}
}

// TestHistoryOver: a run is over when its own events (what it added
// besides the state carried in, out and into forks) pass the limit by more
// than a quarter; a run that is large only because it carries a large
// state is not.
func TestHistoryOver(t *testing.T) {
	const mib = 1 << 20
	runs := []runHistory{
		{Size: mib}, // the limit: in
		{Size: 2300 << 10, In: mib + 10<<10, Out: mib + 12<<10}, // twice the state and a bit: in
		{Size: 1300 << 10, In: 40 << 10},                        // own events 1,260 KB, under 1,280: in
		{Size: 1400 << 10, In: 40 << 10},                        // own events 1,360 KB: over
		{Size: 3 * mib, In: mib, Out: mib, Forks: mib / 2},      // own 512 KB: in
		{Size: 3 * mib, In: mib / 2, Out: mib / 2},              // own 2 MiB: over
	}
	if n := historyOver(runs, mib); n != 2 {
		t.Fatalf("over: %d, want 2", n)
	}
	if n := historyOver([]runHistory{{Size: 50 * mib}}, 0); n != 0 {
		t.Fatalf("no limit: %d", n)
	}
}

// TestCheckSoak: the soak's counts come from the fakes' records: a fork
// whose check did not read the parent's marker, a fork marker in the
// parent, a switch whose next turn ran elsewhere, one refused at the turn
// boundary with a card saying so, and a /fork carried out twice (two fork
// threads and two replies for one command).
func TestCheckSoak(t *testing.T) {
	fake := fakeslack.New(fakeslack.Options{TeamID: "TCHAOS"})
	t.Cleanup(fake.Close)
	api := slackgo.New(fake.Options().BotToken, slackgo.OptionAPIURL(fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := fake.Say(fakeslack.UserMessage{User: approver, Channel: channel, Text: "chaos task s01 t1 n=2"}).Message.TS
	say := func(text string, inThread bool) string {
		t.Helper()
		opts := []slackgo.MsgOption{slackgo.MsgOptionText(text, false)}
		if inThread {
			opts = append(opts, slackgo.MsgOptionTS(root))
		}
		_, ts, err := api.PostMessageContext(ctx, channel, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	forkAsked := fake.Say(fakeslack.UserMessage{User: approver, Channel: channel, ThreadTS: root, Text: "/fork"}).Message.TS
	say("Forked at turn 5 into a thread (backend *local*).", true)
	say("🍴 *Fork of chaos task*", false)
	say("Forked at turn 5 into another thread (backend *local*).", true)
	say("🍴 *Fork of chaos task*", false)
	say("Switching backend from *local* to *docker*; the workspace moves with it.", true)
	say("Switching backend from *docker* to *local*; the workspace moves with it.", true)
	refusedAsked := fake.Say(fakeslack.UserMessage{User: approver, Channel: channel, ThreadTS: root, Text: "/backend docker"}).Message.TS
	say("Switching backend from *local* to *docker*; the workspace moves with it.", true)
	say("✅ Done\nℹ️ Could not save the workspace before switching to docker: no space left on device. Staying on local.", true)

	dir := t.TempDir()
	w := newWorkload(Config{Turns: 20, HistoryLimit: 1 << 20, Soak: &SoakConfig{SampleEvery: 5}})
	w.soak.sid, w.soak.thread, w.soak.done = "s01", root, 12
	w.soak.forks = []forkRecord{
		{ID: "f01", Marker: "s01t5c2", Asked: forkAsked, Thread: "1.1", Token: "f01", Outcome: "answered"},
		{ID: "f02", Marker: "s01t10c1", Thread: "1.2", Token: "f02r1", Outcome: "answered"},
	}
	w.results["f01c1"] = "$ cd .m && cat s01t5c2\ns01t5c2\nexit code: 0"
	w.results["f02r1c1"] = "$ cd .m && cat s01t10c1\nstderr:\ncat: can't open 's01t10c1': No such file or directory\nexit code: 1"
	w.soak.switches = []switchRecord{
		{To: "docker", Turn: 3, Asked: "1.3", Reply: "Switching backend from *local* to *docker*; the workspace moves with it."},
		{To: "local", Turn: 8, Asked: "1.4", Reply: "Switching backend from *docker* to *local*; the workspace moves with it."},
		// Refused at the turn boundary, and the next turn's card says so.
		{To: "docker", Turn: 12, Asked: refusedAsked, Reply: "Switching backend from *local* to *docker*; the workspace moves with it."},
	}
	w.turns = []turnRecord{{Session: "s01", Turn: "t3", On: "docker", Outcome: "answered"}, {Session: "s01", Turn: "t8", Retries: 1, On: "local", Outcome: "answered"},
		{Session: "s01", Turn: "t12", On: "docker", Outcome: "answered"}}
	w.results["s01t12w"] = "$ pwd\n" + dir + "/host-a/workspaces/x\nexit code: 0" // stayed on local
	w.results["s01t3w"] = "$ pwd\n/workspace\nexit code: 0"
	w.results["s01t8r1w"] = "$ pwd\n/workspace\nexit code: 0" // still in the container
	w.verified["s01"] = "$ find .m -name 'f*'\n.m/f01c2\nexit code: 0"

	r := w.checkSoak(&stack{slack: fake, dir: dir}, fake.Snapshot())
	if r.Forks != 2 || r.ForksChecked != 1 || r.ForksMissing != 1 || r.ForkLeaks != 1 {
		t.Fatalf("forks %d, checked %d, missing %d, leaks %d; want 2, 1, 1, 1 (%v)", r.Forks, r.ForksChecked, r.ForksMissing, r.ForkLeaks, r.problems)
	}
	if r.Switches != 3 || r.SwitchesConfirmed != 1 || r.SwitchesRefused != 1 || r.SwitchesMissed != 1 {
		t.Fatalf("switches %d, confirmed %d, refused %d, missed %d; want 3, 1, 1, 1 (%v)", r.Switches, r.SwitchesConfirmed, r.SwitchesRefused, r.SwitchesMissed, r.problems)
	}
	if r.CommandsTwice != 1 {
		t.Fatalf("commands twice %d, want 1 (%v)", r.CommandsTwice, r.problems)
	}
	if len(r.failures()) != 4 {
		t.Fatalf("failures %q, want 4", r.failures())
	}

	if !ranOn("$ pwd\n"+dir+"/host-a/workspaces/x\nexit code: 0", "local", dir) || ranOn("$ pwd\n/workspace\n[interrupted]", "docker", dir) {
		t.Fatal("ranOn")
	}
}

// TestShowsFailure: the user sees a turn failed on its card or in its
// answer, whichever reached the thread (a card whose last edit did not
// land under a 429 storm still shows the turn running).
func TestShowsFailure(t *testing.T) {
	for text, want := range map[string]bool{
		"❌ Failed — model error":                   true,
		"⚠️ Turn 3 failed: model: 500 Internal":    true,
		"⚠️ Turn 12 failed.":                       true,
		"chaos verified s01":                       false,
		"⏳ Running — `cat .m/*`":                   false,
		"the tests failed: ⚠️ Turn 3 failed is ok": false,
	} {
		if got := showsFailure(text); got != want {
			t.Errorf("showsFailure(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestOwnFailure: a failure counts for the user's message only when it
// names a turn after every turn the thread named before the message: an
// earlier turn's failure, posted after it (a late answer, or one held back
// by rate limits), is not its own.
func TestOwnFailure(t *testing.T) {
	for _, tc := range []struct {
		text  string
		known int
		want  bool
	}{
		{"⚠️ Turn 9 failed: model: 500 Internal", 9, false},
		{"⚠️ Turn 10 failed: model: 500 Internal", 9, true},
		{"*❌ Failed*\n✅ `true` · 0.1s\nTurn 9 · local · 1 tool call", 9, false},
		{"*❌ Failed*\n✅ `true` · 0.1s\nTurn 10 · local · 1 tool call", 9, true},
		{"*❌ Failed*", 9, true}, // names no turn: taken as its own
		{"chaos answer s01 t3 done", 0, false},
	} {
		if got := ownFailure(tc.text, tc.known); got != tc.want {
			t.Errorf("ownFailure(%q, %d) = %v, want %v", tc.text, tc.known, got, tc.want)
		}
	}
	if n := turnNamed("✋ A command of turn 4 waits for approval · Turn 3 · local"); n != 4 {
		t.Errorf("turnNamed = %d, want the highest turn named, 4", n)
	}
}

// TestLiveHeapIsTheHeapAfterACollection: a process's live heap, read from
// its debug listener, counts what it keeps and not what it dropped, even
// before the collector ran on its own (the 64 MB dropped are gone from the
// second reading because the reading asks for a collection first).
func TestLiveHeapIsTheHeapAfterACollection(t *testing.T) {
	srv := httptest.NewServer(app.DebugHandler())
	defer srv.Close()
	p := newProc("worker-x", "", t.TempDir(), nil)
	p.out = &syncbuf.Buffer{}
	fmt.Fprintf(p.out, "time=x level=INFO msg=\"debug profiles\" addr=%s\n", strings.TrimPrefix(srv.URL, "http://"))
	kept := make([]byte, 64<<20)
	for i := range kept {
		kept[i] = byte(i)
	}
	with, err := p.liveHeap()
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(kept)
	kept = nil
	without, err := p.liveHeap()
	if err != nil {
		t.Fatal(err)
	}
	if with < 64<<20 || with-without < 60<<20 {
		t.Fatalf("live heap %d MB holding 64 MB, %d MB after dropping it; want the 64 MB in the first only", with>>20, without>>20)
	}
}

// TestMemoryVerdictJudgesTheLiveHeap: resident size rising while the live
// heap holds is not growth; a live heap rising is, whatever the resident
// size does; without live heaps the resident size decides.
func TestMemoryVerdictJudgesTheLiveHeap(t *testing.T) {
	mk := func(rss, live func(int) float64) []MemSample {
		var out []MemSample
		for turn := 25; turn <= 1000; turn += 25 {
			s := MemSample{Turn: turn, Bytes: int64(rss(turn) * (1 << 20))}
			if live != nil {
				s.Live = int64(live(turn) * (1 << 20))
			}
			out = append(out, s)
		}
		return out
	}
	flat := func(int) float64 { return 60 }
	climb := func(turn int) float64 { return 100 + 0.1*float64(turn) }
	for _, c := range []struct {
		name      string
		rss, live func(int) float64
		want      string
	}{
		{"resident rises, live holds", climb, flat, "stable"},
		{"live rises", flat, climb, "growing"},
		{"no live heap, resident rises", climb, nil, "growing"},
		{"no live heap, resident holds", flat, nil, "stable"},
	} {
		if got := memoryVerdict(mk(c.rss, c.live)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
