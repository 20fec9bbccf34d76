package discord

import (
	"context"
	"fmt"
	"strings"
	"unicode"

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

// maxDescription is Discord's limit on a command's description.
const maxDescription = 100

// Commands are the slash commands the adapter registers, for the given
// backend names: one per command of the core's table (chat.Commands),
// described by its help line, with the options each takes here.
func Commands(backends []string) []*discordgo.ApplicationCommand {
	choices := backendChoices(backends)
	str := func(name, desc string, ch []*discordgo.ApplicationCommandOptionChoice) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name, Description: desc, Choices: ch}
	}
	boolean := func(name, desc string) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionBoolean, Name: name, Description: desc}
	}
	minN := 1.0
	options := map[string][]*discordgo.ApplicationCommandOption{
		chat.CmdHistory: {{
			Type: discordgo.ApplicationCommandOptionInteger, Name: "count", Description: fmt.Sprintf("How many entries (default %d)", chat.DefaultHistory),
			MinValue: &minN, MaxValue: float64(chat.MaxHistory),
		}},
		chat.CmdBackend: {str("name", "Backend to switch to (leave out to show the current one)", choices)},
		chat.CmdFork: {str("title", "Title of the new thread", nil), str("backend", "Backend of the copy (default: the same)", choices), {
			Type: discordgo.ApplicationCommandOptionInteger, Name: "turn", Description: "Fork from the end of this turn (default: the latest; /status lists them)", MinValue: &minN,
		}},
		chat.CmdRewind: {{
			Type: discordgo.ApplicationCommandOptionInteger, Name: "turn", Description: "The turn to go back to (/status lists them)", MinValue: &minN, Required: true,
		}, boolean("confirm", "Set to True to really undo the later turns")},
		chat.CmdSessions: {boolean("all", "List everyone's sessions, not only yours")},
		chat.CmdRepo: {str("repository", "owner/name, owner/name@branch or an https:// git URL (leave out to show it)", nil),
			str("branch", "Branch to start from (default: the repository's default)", nil), boolean("full", "Fetch all history, not only the latest commit")},
		chat.CmdPR:      {str("title", "Title of the pull request (default: the session's first request)", nil)},
		chat.CmdTitle:   {{Type: discordgo.ApplicationCommandOptionString, Name: "text", Description: "The session's new title (also the thread's name)", Required: true, MaxLength: 100}},
		chat.CmdModel:   {str("name", "Model to switch to (leave out to show the current one and those offered)", nil)},
		chat.CmdDestroy: {boolean("confirm", "Set to True to really destroy the session")},
	}
	var out []*discordgo.ApplicationCommand
	for _, c := range chat.Commands() {
		out = append(out, &discordgo.ApplicationCommand{Name: c.Name, Description: describe(c.Help), Options: options[c.Name]})
	}
	return out
}

// describe makes a help line a Discord description: capitalised, within
// Discord's 100 characters.
func describe(help string) string {
	r := []rune(help)
	if len(r) == 0 {
		return "sandbot command"
	}
	r[0] = unicode.ToUpper(r[0])
	if len(r) > maxDescription {
		r = append(r[:maxDescription-1], '…')
	}
	return string(r)
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
		case (d.Name == chat.CmdFork || d.Name == chat.CmdRewind) && o.Name == "turn":
			cmd.N = int(o.IntValue())
		case d.Name == chat.CmdRewind && o.Name == "confirm":
			cmd.Confirm = o.BoolValue()
		case d.Name == chat.CmdSessions && o.Name == "all" && o.BoolValue():
			cmd.Args = []string{"all"}
		case d.Name == chat.CmdPR && o.Name == "title":
			cmd.Args = strings.Fields(o.StringValue())
		case d.Name == chat.CmdTitle && o.Name == "text":
			cmd.Args = strings.Fields(o.StringValue())
			cmd.Title = strings.Join(cmd.Args, " ")
		case d.Name == chat.CmdModel && o.Name == "name":
			cmd.Args = []string{o.StringValue()}
		}
	}
	if d.Name == chat.CmdRepo {
		// Positional, as /repo takes them typed: repository, branch, full.
		var repo, branch string
		var full bool
		for _, o := range d.Options {
			switch o.Name {
			case "repository":
				repo = o.StringValue()
			case "branch":
				branch = o.StringValue()
			case "full":
				full = o.BoolValue()
			}
		}
		if repo != "" {
			cmd.Args = append(cmd.Args, repo)
			if branch != "" {
				cmd.Args = append(cmd.Args, branch)
			}
			if full {
				cmd.Args = append(cmd.Args, "full")
			}
		}
	}
	return cmd
}
