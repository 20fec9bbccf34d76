package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
)

// backendChoices are the choices of a backend option: the backends the
// workers serve, or none (free text, validated by the workflow) when they
// are not known.
func backendChoices(names []string) []*discordgo.ApplicationCommandOptionChoice {
	var out []*discordgo.ApplicationCommandOptionChoice
	for _, n := range names {
		if len(out) == maxChoices {
			break
		}
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: n, Value: n})
	}
	return out
}

// Commands are the slash commands the adapter registers, for the given
// backend names. They mirror the core's commands.
func Commands(backends []string) []*discordgo.ApplicationCommand {
	choices := backendChoices(backends)
	str := func(name, desc string, required bool, ch []*discordgo.ApplicationCommandOptionChoice) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name, Description: desc, Required: required, Choices: ch}
	}
	minN := 1.0
	return []*discordgo.ApplicationCommand{
		{Name: chat.CmdHelp, Description: "List sandbot's commands"},
		{Name: chat.CmdStatus, Description: "Show this session: backend, turns, state, owner, workflow link"},
		{Name: chat.CmdHistory, Description: "Show the last entries of this session's transcript", Options: []*discordgo.ApplicationCommandOption{{
			Type: discordgo.ApplicationCommandOptionInteger, Name: "count", Description: fmt.Sprintf("How many entries (default %d)", chat.DefaultHistory),
			MinValue: &minN, MaxValue: float64(chat.MaxHistory),
		}}},
		{Name: chat.CmdStop, Description: "Stop the running turn"},
		{Name: chat.CmdPause, Description: "Pause this session after the running turn"},
		{Name: chat.CmdResume, Description: "Resume a paused session"},
		{Name: chat.CmdBackend, Description: "Show the sandbox backend, or switch it at the next turn boundary", Options: []*discordgo.ApplicationCommandOption{
			str("name", "Backend to switch to (leave out to show the current one)", false, choices),
		}},
		{Name: chat.CmdFork, Description: "Copy this session (conversation and workspace) into a new thread", Options: []*discordgo.ApplicationCommandOption{
			str("title", "Title of the new thread", false, nil),
			str("backend", "Backend of the copy (default: the same)", false, choices),
		}},
		{Name: chat.CmdSessions, Description: "List running sessions in this channel"},
		{Name: chat.CmdDestroy, Description: "End this session and delete its sandbox and snapshots", Options: []*discordgo.ApplicationCommandOption{{
			Type: discordgo.ApplicationCommandOptionBoolean, Name: "confirm", Description: "Set to True to really destroy the session",
		}}},
	}
}

// registerCommands overwrites the application's commands (in the
// configured guild, or globally) with Commands.
func (a *Adapter) registerCommands(ctx context.Context) error {
	backends := a.cfg.Backends
	if a.cfg.ListBackends != nil {
		list, err := a.cfg.ListBackends(ctx)
		if err != nil {
			a.log.Warn("listing backends failed; /backend takes any name", "err", err)
		} else {
			backends = list
		}
	}
	cmds := Commands(backends)
	got, err := a.s.ApplicationCommandBulkOverwrite(a.cfg.ApplicationID, a.cfg.GuildID, cmds, discordgo.WithContext(ctx))
	if err != nil {
		where := "globally"
		if a.cfg.GuildID != "" {
			where = "in guild " + a.cfg.GuildID + " (is the bot in it, invited with the applications.commands scope?)"
		}
		return fmt.Errorf("discord: register slash commands %s: %w", where, err)
	}
	a.log.Info("slash commands registered", "count", len(got), "guild", a.cfg.GuildID, "backends", backends)
	return nil
}

// toCommand maps a slash command's options onto the core's Command.
func toCommand(d discordgo.ApplicationCommandInteractionData) chat.Command {
	cmd := chat.Command{Name: d.Name}
	for _, o := range d.Options {
		switch {
		case d.Name == chat.CmdHistory && o.Name == "count":
			cmd.N = int(o.IntValue())
		case d.Name == chat.CmdBackend && o.Name == "name":
			cmd.Backend = o.StringValue()
		case d.Name == chat.CmdFork && o.Name == "title":
			cmd.Title = o.StringValue()
		case d.Name == chat.CmdFork && o.Name == "backend":
			cmd.Backend = o.StringValue()
		case d.Name == chat.CmdDestroy && o.Name == "confirm":
			cmd.Confirm = o.BoolValue()
		}
	}
	return cmd
}

// privateAnswer says whether a command's answer is for the asker only,
// so its deferred response is made ephemeral from the start.
func privateAnswer(cmd chat.Command) bool {
	switch cmd.Name {
	case chat.CmdHelp, chat.CmdStatus, chat.CmdHistory, chat.CmdSessions:
		return true
	case chat.CmdBackend:
		return cmd.Backend == ""
	case chat.CmdDestroy:
		return !cmd.Confirm
	}
	return false
}
