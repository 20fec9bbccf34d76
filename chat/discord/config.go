package discord

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat"
)

// Defaults for zero Config fields.
const (
	DefaultEditInterval        = time.Second
	DefaultInteractionTokenTTL = 15 * time.Minute
	DefaultMaxAnswerParts      = 4
	DefaultThreadAutoArchive   = 1440 // minutes
	// minEditInterval is the fastest pace accepted: Discord allows about
	// five edits per five seconds per channel.
	minEditInterval = 250 * time.Millisecond
)

// Config configures the Discord adapter. The lead's config package fills
// it from the environment; the variable named in each comment is the one
// Validate mentions.
type Config struct {
	// Token is the bot token (SANDBOT_DISCORD_TOKEN), without "Bot ".
	Token string
	// ApplicationID is the application's ID (SANDBOT_DISCORD_APP_ID).
	ApplicationID string
	// GuildID registers the slash commands in this guild only
	// (SANDBOT_DISCORD_GUILD_ID); they appear at once there. Empty
	// registers them globally.
	GuildID string

	// AllowedGuilds, AllowedChannels, AllowedUsers and AllowedRoles
	// restrict who may use the bot where (SANDBOT_DISCORD_ALLOWED_*). Empty
	// lists allow everything. Users pass if they are listed in
	// AllowedUsers or hold one of AllowedRoles (when either list is set).
	// AllowedChannels are the channels sessions start in; a thread counts
	// as its parent channel. Guild and channel lists do not apply to DMs.
	AllowedGuilds   []string
	AllowedChannels []string
	AllowedUsers    []string
	AllowedRoles    []string
	// ApproverRoles are role IDs whose holders may decide any approval
	// (SANDBOT_DISCORD_APPROVER_ROLES). The adapter marks their messages
	// Admin; the workflow's settings must list the same roles.
	ApproverRoles []string
	// DisableDMs ignores direct messages.
	DisableDMs bool

	// MessageContentIntent asks for the privileged MESSAGE_CONTENT intent
	// (SANDBOT_DISCORD_MESSAGE_CONTENT). It must also be switched on in
	// the Developer Portal. Without it Discord blanks the text of messages
	// that do not mention the bot, so in session threads the bot must be
	// mentioned every time.
	MessageContentIntent bool

	// EditInterval is the least time between two edits of one status
	// message (SANDBOT_DISCORD_EDIT_INTERVAL, default 1 s).
	EditInterval time.Duration
	// InteractionTokenTTL is how long an interaction token may be used for
	// replies (default 15 min, Discord's lifetime). Replies that come later
	// are posted as normal bot messages. Tests set it short.
	InteractionTokenTTL time.Duration
	// MaxAnswerParts is how many messages a long answer may be split into
	// before it is uploaded as a file instead (default 4).
	MaxAnswerParts int
	// ThreadAutoArchive is the auto-archive duration of session threads in
	// minutes: 60, 1440 (default), 4320 or 10080.
	ThreadAutoArchive int

	// Backends are the sandbox backends the workers serve; /backend and
	// /fork offer them as choices (at most 25). ListBackends, if set, is
	// asked instead when commands are registered.
	Backends     []string
	ListBackends func(ctx context.Context) ([]string, error)

	// APIBase sends all Discord REST traffic to this base URL instead of
	// https://discord.com (SANDBOT_DISCORD_API_BASE), for the in-project
	// fake. The gateway URL then comes from that server too.
	APIBase string
	// HTTPClient makes the REST calls (default: a client with a 30 s
	// timeout). With APIBase set, its transport is wrapped.
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	if c.EditInterval == 0 {
		c.EditInterval = DefaultEditInterval
	}
	if c.InteractionTokenTTL == 0 {
		c.InteractionTokenTTL = DefaultInteractionTokenTTL
	}
	if c.MaxAnswerParts == 0 {
		c.MaxAnswerParts = DefaultMaxAnswerParts
	}
	if c.ThreadAutoArchive == 0 {
		c.ThreadAutoArchive = DefaultThreadAutoArchive
	}
	return c
}

// Validate checks the configuration and names the environment variable of
// every problem, with what is allowed.
func (c Config) Validate() error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, fmt.Errorf("discord: SANDBOT_DISCORD_%s: %s", env, fmt.Sprintf(format, args...)))
	}
	switch tok := c.Token; {
	case tok == "":
		bad("TOKEN", "is not set; copy the bot token from the Developer Portal (Bot → Reset Token)")
	case strings.HasPrefix(tok, "Bot "):
		bad("TOKEN", "must be the bare token, without the \"Bot \" prefix")
	case strings.ContainsAny(tok, " \t\r\n"):
		bad("TOKEN", "contains white space; paste the token alone")
	case !tokenShape(tok):
		bad("TOKEN", "does not look like a bot token (three dot-separated parts, the first the bot's ID in base64)")
	}
	if c.ApplicationID == "" {
		bad("APP_ID", "is not set; copy the Application ID from the Developer Portal (General Information)")
	} else if !snowflake(c.ApplicationID) {
		bad("APP_ID", "%q is not a Discord ID (17 to 20 digits)", c.ApplicationID)
	}
	if c.GuildID != "" && !snowflake(c.GuildID) {
		bad("GUILD_ID", "%q is not a Discord ID (17 to 20 digits)", c.GuildID)
	}
	for env, list := range map[string][]string{
		"ALLOWED_GUILDS": c.AllowedGuilds, "ALLOWED_CHANNELS": c.AllowedChannels, "ALLOWED_USERS": c.AllowedUsers,
		"ALLOWED_ROLES": c.AllowedRoles, "APPROVER_ROLES": c.ApproverRoles,
	} {
		for _, id := range list {
			if !snowflake(id) {
				bad(env, "%q is not a Discord ID (17 to 20 digits; enable Developer Mode and use Copy ID)", id)
			}
		}
	}
	if c.GuildID != "" && len(c.AllowedGuilds) > 0 && !slices.Contains(c.AllowedGuilds, c.GuildID) {
		bad("GUILD_ID", "%s is not in SANDBOT_DISCORD_ALLOWED_GUILDS, so its commands could never be used", c.GuildID)
	}
	if c.EditInterval != 0 && c.EditInterval < minEditInterval {
		bad("EDIT_INTERVAL", "%v is too fast; Discord allows about 5 edits per 5 s per channel, use %v or more", c.EditInterval, minEditInterval)
	}
	if c.InteractionTokenTTL < 0 || c.InteractionTokenTTL > DefaultInteractionTokenTTL {
		errs = append(errs, fmt.Errorf("discord: InteractionTokenTTL %v must be between 0 and %v (Discord's token lifetime)", c.InteractionTokenTTL, DefaultInteractionTokenTTL))
	}
	if c.MaxAnswerParts < 0 || c.MaxAnswerParts > 10 {
		errs = append(errs, fmt.Errorf("discord: MaxAnswerParts %d must be between 1 and 10", c.MaxAnswerParts))
	}
	switch c.ThreadAutoArchive {
	case 0, 60, 1440, 4320, 10080:
	default:
		errs = append(errs, fmt.Errorf("discord: ThreadAutoArchive %d must be 60, 1440, 4320 or 10080 minutes", c.ThreadAutoArchive))
	}
	if len(c.Backends) > maxChoices {
		errs = append(errs, fmt.Errorf("discord: %d backends, but a slash command offers at most %d choices", len(c.Backends), maxChoices))
	}
	if c.APIBase != "" {
		if u, err := url.Parse(c.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("API_BASE", "%q is not an http(s) base URL such as http://127.0.0.1:8099", c.APIBase)
		}
	}
	return errors.Join(errs...)
}

// tokenShape reports whether tok has a bot token's three parts, the first
// being a base64-encoded snowflake.
func tokenShape(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return false
	}
	id, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		id, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	}
	return err == nil && snowflake(string(id))
}

func snowflake(s string) bool {
	return len(s) >= 17 && len(s) <= 20 && strings.Trim(s, "0123456789") == ""
}

// Budget is the pacing and size budget the core should use for Discord:
// put it in chat.CoreConfig.Budgets["discord"].
func (c Config) Budget() chat.Budget {
	c = c.withDefaults()
	return chat.Budget{
		MinEditInterval: c.EditInterval,
		// Discord allows about 5 edits per 5 s per channel, and each session
		// is its own thread (channel): a burst of 5 shows quick tool calls
		// at once and still averages one edit per EditInterval.
		EditBurst:      5,
		MaxButtonValue: chat.MaxDiscordButtonValue,
		// A status card goes into one embed (4,096 characters of
		// description); this leaves room for Markdown the renderer adds.
		MaxCardChars: 3500,
	}
}

// Authorize reports whether u may use the bot in th, under the Allowed*
// lists. It needs only what a chat.Thread and chat.User carry (u.Roles are
// Discord role IDs), so it can also back chat.CoreConfig.Authorize. A
// refusal is a *chat.UserError whose text may be shown.
func (c Config) Authorize(u chat.User, th chat.Thread) error {
	deny := func(why string) error {
		return &chat.UserError{Msg: "You may not use this bot here.", Err: errors.New("discord: " + why)}
	}
	dm := th.Workspace == ""
	if dm && c.DisableDMs {
		return deny("direct messages are disabled")
	}
	if len(c.AllowedUsers) > 0 || len(c.AllowedRoles) > 0 {
		ok := slices.Contains(c.AllowedUsers, u.ID)
		for _, r := range u.Roles {
			ok = ok || slices.Contains(c.AllowedRoles, r)
		}
		if !ok {
			return deny("user " + u.ID + " is not in the allowed users or roles")
		}
	}
	if dm {
		return nil
	}
	if len(c.AllowedGuilds) > 0 && !slices.Contains(c.AllowedGuilds, th.Workspace) {
		return deny("guild " + th.Workspace + " is not allowed")
	}
	if len(c.AllowedChannels) > 0 && !slices.Contains(c.AllowedChannels, th.Channel) && !slices.Contains(c.AllowedChannels, th.Thread) {
		return deny("channel " + th.Channel + " is not allowed")
	}
	return nil
}

// approver reports whether roles include an approver role.
func (c Config) approver(roles []string) bool {
	for _, r := range roles {
		if slices.Contains(c.ApproverRoles, r) {
			return true
		}
	}
	return false
}
