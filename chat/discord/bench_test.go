package discord_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkProgressLatency measures, at the Discord fake, the time from a
// tool call's completion (its turn state changing) to the PATCH of the
// status message that shows it, through the real core (default polling)
// and the adapter with Discord's pacing (Config.Budget). Sessions are the
// in-memory fake, so this is the bot's share of the latency; the lead's
// end-to-end benchmark adds the worker and Temporal. Each simulated tool
// call runs for at least one edit interval, as real commands rarely finish
// faster.
// Reports p50 and p95 in ms.
func BenchmarkProgressLatency(b *testing.B) {
	f := fakediscord.Start(b, fakediscord.Options{})
	cfg := config(f)
	fs := &chattest.Sessions{}
	core := chat.NewCore(chat.CoreConfig{Budgets: map[string]chat.Budget{discord.Platform: cfg.Budget()}}, fs, nil)
	b.Cleanup(core.Close)
	start(b, cfg, core)

	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"benchmark")
	if err != nil {
		b.Fatal(err)
	}
	id := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}.ID()
	ref := statusRef(b, f, fs, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	interval := cfg.Budget().MinEditInterval

	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call := fmt.Sprintf("call_%d", i)
		cmd := fmt.Sprintf("step-%d", i)
		fs.Set(id, func(ts *session.TurnState) {
			ts.ToolCalls = append(ts.ToolCalls, session.ToolCallState{CallID: call, Name: "shell", Commands: []string{cmd}, Status: session.CallRunning})
		})
		// The command runs for an edit interval plus a spread of up to a
		// second, so completions do not phase-lock with the core's polls.
		time.Sleep(interval + time.Duration(i*7919%1000)*time.Millisecond)
		done := time.Now()
		fs.Set(id, func(ts *session.TurnState) {
			c := &ts.ToolCalls[len(ts.ToolCalls)-1]
			c.Status, c.ExitCode, c.Duration = session.CallCompleted, exit(0), interval
		})
		e, err := f.WaitEdit(ctx, done, func(e fakediscord.Edit) bool {
			return e.MessageID == ref && strings.Contains(e.EmbedText(), "`"+cmd+"` · ")
		})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, e.At.Sub(done))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
}
