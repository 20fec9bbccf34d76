// Package discord is the Discord front end of sandbot: an adapter over
// github.com/bwmarrin/discordgo that normalizes gateway events into the
// platform-neutral chat core's Message, Command and Action, acknowledges
// Discord within its deadlines, and implements chat.Poster (plus the
// optional ThreadStarter, Mentioner and ThreadLinker) so the core can show
// sessions in Discord threads. Rendering is the core's chat.Card, turned
// into a Discord message by the pure converter ToMessage; long answers are
// split by SplitMarkdown or uploaded as a file.
//
// # Sessions
//
// A session is a thread. Mentioning the bot in a channel opens a public
// thread from that message (its ID is the message's ID, as Discord does it)
// and that thread is the session: Location{Platform: "discord", Workspace:
// guild, Channel: parent channel, Thread: thread}. A DM is a session too
// (Channel and Thread are both the DM channel).
//
// Whether a message in a thread continues a session is decided without
// asking Temporal: threads whose owner is the bot are session threads (the
// bot opens every session thread itself), so any message there is for the
// bot, provided the MESSAGE_CONTENT intent lets the bot read it. In a
// thread someone else opened, only messages that mention the bot count.
// Thread owners come from the gateway (READY/GUILD_CREATE state and
// THREAD_CREATE), from the bot's own thread creation, and for an unknown
// channel from one GET /channels/{id}, all cached.
//
// Bot messages (including the bot's own), webhook messages, system
// messages and edits never start turns.
//
// # Duplicates and ordering
//
// The message ID is the event ID, so the session workflow recognises a
// redelivered message and never starts a second turn for it. A gateway
// RESUME can replay events the bot already handled; a bounded set of
// recently seen message and interaction IDs drops those before they reach
// the core, and a replayed channel mention whose thread already exists
// reuses that thread.
//
// The session's discordgo.Session runs with SyncEvents set: handlers run in
// the gateway's read loop, in order, and each only does cheap work there
// (bookkeeping, then handing the event to a goroutine). Messages are
// handed to one queue per channel, so messages in a thread reach the core
// in the order they were sent, while slow work never blocks the gateway
// (heartbeat ACKs are read on the same loop). Interactions each get their
// own goroutine, which answers Discord first.
//
// # Interactions
//
// Every interaction is answered at once: slash commands are deferred
// privately (only the asker sees "thinking…"; whether the answer is
// private is the core's Reply.Ephemeral, known only once the command ran,
// and a deferral's visibility cannot change), Approve buttons with a
// deferred update, Reject with a modal asking for a reason. The work
// follows: a private answer edits the deferred response; a public one
// replaces it with a public follow-up, so nothing public ever appears
// only to vanish. A modal submit is always answered too, even when it
// carries no message or lacks the form's input. An interaction token lives 15 minutes (InteractionTokenTTL);
// an answer that comes later, or that Discord refuses because the token
// expired, is posted as a normal bot message in the channel, mentioning
// the user. Status messages and final answers never use interaction tokens
// at all: they are bot messages, so a turn of any length keeps updating.
//
// React and Unreact put the bot's reaction on a message and take it back
// (👀 while a message's turn runs, then ✅ or ❌, as the core decides). The
// mention that opened a session lives in the parent channel under the
// thread's ID; they find it there.
//
// Buttons carry their action and the core's approval value in the
// custom_id (CustomID keeps it within 100 characters), so they work after
// a bot restart: nothing about them is kept in memory.
//
// # Limits
//
// The core paces status edits (Config.Budget: one edit per EditInterval
// per message). discordgo waits out 429 responses and retries, so a rate
// limited edit is delayed, not lost; if one still fails, the core keeps the
// newer card pending and sends it with the next edit.
//
// # Running against the in-project fake
//
// internal/fake/discord speaks Discord's REST API and gateway. Point the
// adapter at it with APIBase; nothing process-global changes, so tests
// with separate fakes run in parallel:
//
//	f := fakediscord.Start(t, fakediscord.Options{}) // or New + Close
//	a, err := discord.New(discord.Config{
//		Token:                f.Token(),
//		ApplicationID:        f.AppID(),
//		GuildID:              fakediscord.DefaultGuildID,
//		MessageContentIntent: true,
//		APIBase:              f.URL(),
//		Backends:             []string{"local"},
//		InteractionTokenTTL:  time.Minute, // optional: exercise the handover
//	}, log)
//	go a.Run(ctx, core)
//	<-a.Ready()
//	um, _ := f.UserMessage(fakediscord.DefaultChannelID, member, "<@"+f.AppID()+"> fix the test")
//	// the session thread's ID is um.ID; f.Edits() has every PATCH with its time
//
// Give the core cfg.Budget() as CoreConfig.Budgets[discord.Platform].
package discord
