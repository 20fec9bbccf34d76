// Package slack is sandbot's Slack front end: an adapter over
// github.com/slack-go/slack that turns Slack events (Socket Mode or the
// HTTP Events API, slash commands, interactivity) into chat.Message,
// chat.Action and chat.Command values for the platform-neutral core, and
// implements chat.Poster so the core can show sessions in Slack threads.
//
// It owns everything Slack-specific and nothing else: normalization at the
// edge (which messages start or continue a session, duplicate and retry
// handling, ack within 3 s then work on a goroutine), conversion of neutral
// cards to Block Kit within Slack's limits (ToBlocks), Markdown to mrkdwn
// (Mrkdwn), splitting long answers (SplitMessages) or uploading them as a
// file, naming users by their display names (users.info, cached),
// pacing chat.update within the workspace's rate budget, and Slack's agent
// surfaces for a running turn (chat.TurnObserver): the thread status, the
// agent session whose native stop button stops the turn (assistant.go),
// and, when configured, native streaming (stream.go).
// Sessions, commands, approvals and progress live in package chat.
package slack
