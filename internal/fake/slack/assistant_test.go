package fakeslack

import (
	"errors"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// The thread status through slack-go's own call: set, cleared by a bot
// reply, refused for a thread that does not exist.
func TestThreadStatusWire(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Text: "hi"}).Message.TS
	set := func(th, status string) error {
		return api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C0001", ThreadTS: th, Status: status})
	}
	if err := set(root, "is working…"); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.ThreadStatus("C0001", root); st.Status != "is working…" {
		t.Fatalf("status = %+v", st)
	}
	if _, _, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("reply", false), slack.MsgOptionTS(root)); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.ThreadStatus("C0001", root); st.Status != "" || len(st.History) != 2 {
		t.Fatalf("after a reply: %+v, want cleared", st)
	}
	if err := set("1600000000.000001", "is working…"); slackErr(err) != "invalid_thread_ts" {
		t.Fatalf("unknown thread: %v", err)
	}
	if err := set(root, ""); err != nil {
		t.Fatalf("clearing: %v", err)
	}
}

// Agent sessions: only for agent apps; statuses checked; the stop button
// exists only while processing, and its event names the thread and the
// streams it halted.
func TestAgentSessionsWire(t *testing.T) {
	ctx := testCtx(t)
	s, api := newClient(t, Options{})
	root := s.Say(UserMessage{Text: "hi"}).Message.TS
	params := slack.AgentSessionSetStatusParameters{Status: "processing", ChannelID: "C0001", ThreadTS: root, InitiatorUserID: "U0001"}
	if _, err := api.SetAgentSessionStatusContext(ctx, params); slackErr(err) != "not_allowed" {
		t.Fatalf("a non-agent app: %v, want not_allowed", err)
	}

	s, api = newClient(t, Options{AgentApp: true})
	root = s.Say(UserMessage{Text: "hi"}).Message.TS
	params.ThreadTS = root
	if _, err := s.NativeStopPayload("U0001", "C0001", root); err == nil {
		t.Fatal("a stop button on a thread without a session")
	}
	res, err := api.SetAgentSessionStatusContext(ctx, params)
	if err != nil || res.Status != "processing" {
		t.Fatalf("setStatus = %+v, %v", res, err)
	}
	bad := params
	bad.Status = "is thinking…"
	if _, err := api.SetAgentSessionStatusContext(ctx, bad); slackErr(err) != "invalid_arguments" {
		t.Fatalf("free text status: %v, want invalid_arguments", err)
	}
	p, err := s.NativeStopPayload("U0002", "C0001", root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"agent_session_stopped"`, `"thread_ts":"` + root + `"`, `"user":"U0002"`, `"streaming_message_ts":[]`} {
		if !strings.Contains(string(p), want) {
			t.Errorf("payload lacks %s: %s", want, p)
		}
	}
	if as, _ := s.AgentSession("C0001", root); as.Status != "processing" || as.Initiator != "U0001" {
		t.Fatalf("a click changed the session by itself: %+v", as)
	}
	params.Status = "active"
	if _, err := api.SetAgentSessionStatusContext(ctx, params); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NativeStopPayload("U0002", "C0001", root); err == nil {
		t.Fatal("a stop button on an active session")
	}
}

// Streams: recipients required in channels, tasks merged by id, appends
// refused once stopped, the stop halting streams.
func TestStreamsWire(t *testing.T) {
	s, api := newClient(t, Options{AgentApp: true})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Text: "hi"}).Message.TS
	task := slack.NewTaskUpdateChunk("c1", "ls")
	task.Status = slack.TaskCardStatusInProgress
	if _, _, err := api.StartStreamContext(ctx, "C0001", slack.MsgOptionTS(root), slack.MsgOptionChunks(task)); slackErr(err) != "invalid_arguments" {
		t.Fatalf("a channel stream without a recipient: %v", err)
	}
	_, ts, err := api.StartStreamContext(ctx, "C0001", slack.MsgOptionTS(root),
		slack.MsgOptionRecipientUserID("U0001"), slack.MsgOptionRecipientTeamID("T0001"), slack.MsgOptionChunks(task))
	if err != nil {
		t.Fatal(err)
	}
	task.Status = slack.TaskCardStatusComplete
	if _, _, err := api.AppendStreamContext(ctx, "C0001", ts, slack.MsgOptionChunks(task)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.StopStreamContext(ctx, "C0001", ts, slack.MsgOptionMarkdownText("Done.")); err != nil {
		t.Fatal(err)
	}
	ss := s.Streams("C0001", root)
	if len(ss) != 1 || ss[0].Markdown != "Done." || len(ss[0].Tasks) != 1 || ss[0].Tasks[0].Status != "complete" || ss[0].State != "stopped" {
		t.Fatalf("streams = %+v", ss)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C0001", ts, slack.MsgOptionMarkdownText("more")); slackErr(err) != "message_not_in_streaming_state" {
		t.Fatalf("append after stop: %v", err)
	}
	if m, _ := s.Snapshot().Message("C0001", ts); m.Text != "Done." || m.ThreadTS != root {
		t.Fatalf("the streamed message = %+v", m)
	}
	// A native stop halts a live stream.
	if _, err := api.SetAgentSessionStatusContext(ctx, slack.AgentSessionSetStatusParameters{Status: "processing", ChannelID: "C0001", ThreadTS: root}); err != nil {
		t.Fatal(err)
	}
	_, live, err := api.StartStreamContext(ctx, "C0001", slack.MsgOptionTS(root),
		slack.MsgOptionRecipientUserID("U0001"), slack.MsgOptionRecipientTeamID("T0001"), slack.MsgOptionMarkdownText("…"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.NativeStopPayload("U0001", "C0001", root)
	if err != nil || !strings.Contains(string(p), `"streaming_message_ts":["`+live+`"]`) {
		t.Fatalf("stop payload %s, %v: want the live stream halted", p, err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C0001", live, slack.MsgOptionMarkdownText("more")); slackErr(err) != "message_not_in_streaming_state" {
		t.Fatalf("append after a native stop: %v", err)
	}
}

// More than the tier's calls in a minute are recorded as violations.
func TestAgentSurfaceRates(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Text: "hi"}).Message.TS
	for range AgentCallsPerMinute + 1 {
		_ = api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C0001", ThreadTS: root, Status: "x"})
	}
	v := s.Snapshot().Violations
	if len(v) != 1 || !strings.Contains(v[0].Detail, "assistant.threads.setStatus") {
		t.Fatalf("violations = %+v, want one for the 51st call", v)
	}
}

// With RateLimitOverBudget the call past the minute's budget is answered
// 429 with Retry-After, as Slack does, and is no violation.
func TestAgentSurfaceRateLimited(t *testing.T) {
	s, api := newClient(t, Options{RateLimitOverBudget: true})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Text: "hi"}).Message.TS
	var last error
	for range AgentCallsPerMinute + 1 {
		last = api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C0001", ThreadTS: root, Status: "x"})
	}
	var rl *slack.RateLimitedError
	if !errors.As(last, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("the call past the budget: %v, want a rate limit with Retry-After", last)
	}
	if v := s.Snapshot().Violations; len(v) != 0 {
		t.Fatalf("violations = %+v, want none", v)
	}
}
