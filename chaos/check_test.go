package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"

	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// TestCheckCountsApprovals: the approval check reads the cards the Slack
// fake holds. A call whose Approve click was acknowledged but whose line
// shows no decision is an approval lost; a line with two decisions was
// decided twice; a call no card shows is not checked. (This runs in plain
// go test: it needs no stack.)
func TestCheckCountsApprovals(t *testing.T) {
	fake := fakeslack.New(fakeslack.Options{TeamID: "TCHAOS"})
	t.Cleanup(fake.Close)
	api := slackgo.New(fake.Options().BotToken, slackgo.OptionAPIURL(fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card := strings.Join([]string{
		"✅ Done",
		"✅ `mkdir -p .m && echo s01t1c1 >> .m/s01t1c1`", "_approved by @alice_",
		"✅ `mkdir -p .m && echo s01t1c2 >> .m/s01t1c2`",
		"✅ `mkdir -p .m && echo s01t1c3 >> .m/s01t1c3`", "_approved by @alice_ _approved by @alice_",
	}, "\n")
	if _, _, err := api.PostMessageContext(ctx, channel, slackgo.MsgOptionText(card, false)); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(Config{})
	for _, id := range []string{"s01t1c1", "s01t1c2", "s01t1c3", "s01t1c4"} {
		w.approved[id] = true
	}
	var rep Report
	w.check(&stack{slack: fake}, &rep)
	if rep.ApprovalsChecked != 3 || rep.ApprovalsLost != 1 || rep.ApprovalsTwice != 1 {
		t.Fatalf("checked %d, lost %d, twice %d; want 3, 1 and 1 (problems: %v)", rep.ApprovalsChecked, rep.ApprovalsLost, rep.ApprovalsTwice, rep.Problems)
	}
}

// TestCheckCountsDeletedCards: a status card a bot deleted as a duplicate
// is not a second card if it stood no longer than the grace (it is counted
// apart); one that stood longer showed its calls twice and counts as
// posted twice. Read from the Slack fake's records of deleted messages.
func TestCheckCountsDeletedCards(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		twice int
	}{
		{"deleted within the grace", time.Hour, 0},
		{"deleted after the grace", -time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeslack.New(fakeslack.Options{TeamID: "TCHAOS"})
			t.Cleanup(fake.Close)
			api := slackgo.New(fake.Options().BotToken, slackgo.OptionAPIURL(fake.URL()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			card := "⚙️ Running\n✅ `mkdir -p .m && echo s01t1c1 >> .m/s01t1c1`"
			var refs []string
			for range 2 {
				_, ts, err := api.PostMessageContext(ctx, channel, slackgo.MsgOptionText(card, false))
				if err != nil {
					t.Fatal(err)
				}
				refs = append(refs, ts)
			}
			if _, _, err := api.DeleteMessageContext(ctx, channel, refs[1]); err != nil {
				t.Fatal(err)
			}
			w := newWorkload(Config{})
			w.cardDeleteGrace = tc.grace
			var rep Report
			w.check(&stack{slack: fake}, &rep)
			if rep.PostedTwice != tc.twice || rep.CardsDeleted != 1 {
				t.Fatalf("posted twice %d, cards deleted %d; want %d and 1 (problems: %v)", rep.PostedTwice, rep.CardsDeleted, tc.twice, rep.Problems)
			}
		})
	}
}

// TestCheckCountsSlowTurnsApart: an answered turn that took longer than
// SlowTurn is counted as slow, with its time, and not as lost; a turn
// whose answer never came is lost.
func TestCheckCountsSlowTurnsApart(t *testing.T) {
	fake := fakeslack.New(fakeslack.Options{TeamID: "TCHAOS"})
	t.Cleanup(fake.Close)
	w := newWorkload(Config{})
	w.turns = []turnRecord{
		{Session: "s01", Turn: "t1", Outcome: "answered", Took: time.Minute},
		{Session: "s01", Turn: "t2", Outcome: "answered", Took: SlowTurn + 38*time.Second},
		{Session: "s02", Turn: "t1", Outcome: "lost"},
	}
	var rep Report
	w.check(&stack{slack: fake}, &rep)
	if rep.SlowTurns != 1 || rep.TurnsLost != 1 || rep.Answered != 2 {
		t.Fatalf("slow %d, lost %d, answered %d; want 1, 1 and 2", rep.SlowTurns, rep.TurnsLost, rep.Answered)
	}
	if want := SlowTurn + 38*time.Second; rep.TurnTime[2] != want || rep.TurnTime[0] != time.Minute {
		t.Errorf("turn time p50 %s, longest %s; want 1m0s and %s", rep.TurnTime[0], rep.TurnTime[2], want)
	}
	if got := strings.Join(rep.Failures(), "; "); strings.Contains(got, "slow") || !strings.Contains(got, "turns lost: 1") {
		t.Errorf("failures %q: want the lost turn and not the slow one", got)
	}
}
