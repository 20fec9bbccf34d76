package discord

import (
	"context"
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
	DefaultAckWithin           = 2 * time.Second
	DefaultTakeoverWait        = 5 * time.Second
	DefaultMaxAnswerParts      = 4
	DefaultThreadAutoArchive   = 1440 // minutes
	// DefaultRequestsPerSecond paces a replica's REST requests so that two
	// replicas on one token stay within Discord's 50 a second per bot,
	// with room for requests that reach Discord bunched up.
	DefaultRequestsPerSecond = 20
	// MaxRequestsPerSecond is Discord's global limit per bot token.
	MaxRequestsPerSecond = 50
)

// Config configures the Discord adapter. The bot's assembly fills it from
// package config, which reads and validates the environment; Validate here
// only catches programming errors, so its messages name fields, not
// environment variables.
type Config struct {
	// Token is the bot token, without "Bot ".
	Token string
	// ApplicationID is the application's ID.
	ApplicationID string
	// GuildID registers the slash commands in this guild only; they appear
	// at once there. Empty registers them globally.
	GuildID string

	// AllowedGuilds, AllowedChannels, AllowedUsers and AllowedRoles
	// restrict who may use the bot where. Empty lists allow everything.
	// Users pass if they are listed in AllowedUsers or hold one of
	// AllowedRoles (when either list is set). AllowedChannels are the
	// channels sessions start in; a thread counts as its parent channel.
	// Guild and channel lists do not apply to DMs.
	AllowedGuilds   []string
	AllowedChannels []string
	AllowedUsers    []string
	AllowedRoles    []string
	// ApproverRoles are role IDs whose holders may decide any approval. The
	// adapter marks their messages Admin; the workflow's settings must list
	// the same roles.
	ApproverRoles []string
	// DisableDMs ignores direct messages.
	DisableDMs bool

	// MessageContentIntent asks for the privileged MESSAGE_CONTENT intent.
	// It must also be switched on in the Developer Portal. Without it
	// Discord blanks the text of messages that do not mention the bot, so
	// in session threads the bot must be mentioned every time.
	MessageContentIntent bool

	// EditInterval is the least time between two edits of one status
	// message (default 1 s).
	EditInterval time.Duration
	// InteractionTokenTTL is how long an interaction token may be used for
	// replies (default 15 min, Discord's lifetime). Replies that come later
	// are posted as normal bot messages. Tests set it short.
	InteractionTokenTTL time.Duration
	// AckWithin bounds how long a click (or a reject modal's submit) waits
	// for its decision to reach the session before the interaction is
	// acknowledged, default 2 s (Discord allows 3). Acknowledging after the
	// decision means a bot that dies first leaves the interaction
	// unacknowledged, so Discord tells the user the application did not
	// respond and they click again, instead of a click that looked
	// accepted deciding nothing.
	AckWithin time.Duration
	// TakeoverWait is how long the first edit of a status message this
	// process took over waits (chat.TakeoverPacer), default 5 s: Discord's
	// edit bucket (5 per 5 s per channel) is shared by every replica on the
	// bot's token, while discordgo knows only this process's requests.
	TakeoverWait time.Duration
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

	// RequestsPerSecond paces this replica's REST requests (default 20,
	// at most 50), interaction answers and webhook calls excepted: Discord
	// answers a bot past 50 requests a second with 429s, counts each
	// against the token (10,000 in 10 minutes get its IP banned), and
	// every replica on the token shares that budget, while discordgo
	// only backs off after a global 429. In any second a replica sends at
	// most RequestsPerSecond+1; give each of N replicas about 40/N (20
	// for two: 42 a second at most together), leaving room for requests
	// that leave evenly spaced and reach Discord bunched up. The chaos
	// suite's load mode (200 sessions, two replicas) counted 990 requests
	// over the global limit without the pace, and 1 with 24 a replica.
	RequestsPerSecond int

	// APIBase sends all Discord REST traffic to this base URL instead of
	// https://discord.com, for the in-project fake. The gateway URL then
	// comes from that server too.
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
	if c.AckWithin == 0 {
		c.AckWithin = DefaultAckWithin
	}
	if c.TakeoverWait == 0 {
		c.TakeoverWait = DefaultTakeoverWait
	}
	if c.MaxAnswerParts == 0 {
		c.MaxAnswerParts = DefaultMaxAnswerParts
	}
	if c.ThreadAutoArchive == 0 {
		c.ThreadAutoArchive = DefaultThreadAutoArchive
	}
	if c.RequestsPerSecond == 0 {
		c.RequestsPerSecond = DefaultRequestsPerSecond
	}
	return c
}

// Validate reports a configuration the adapter cannot run with. Operators'
// mistakes (token shape, IDs, pacing) are caught earlier, by package
// config, with the variable to fix; these are programming errors, and the
// token is never echoed.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("discord: config: "+format, args...))
	}
	if c.Token == "" {
		bad("Token is empty")
	} else if strings.HasPrefix(c.Token, "Bot ") {
		bad("Token must be the bare token, without the \"Bot \" prefix")
	}
	if c.ApplicationID == "" {
		bad("ApplicationID is empty")
	}
	if c.EditInterval < 0 {
		bad("EditInterval %v must not be negative (zero means the default)", c.EditInterval)
	}
	if c.InteractionTokenTTL < 0 || c.InteractionTokenTTL > DefaultInteractionTokenTTL {
		bad("InteractionTokenTTL %v must be between 0 and %v (Discord's token lifetime)", c.InteractionTokenTTL, DefaultInteractionTokenTTL)
	}
	if c.RequestsPerSecond < 0 || c.RequestsPerSecond > MaxRequestsPerSecond {
		bad("RequestsPerSecond %d must be between 1 and %d (Discord's limit per bot; zero means the default)", c.RequestsPerSecond, MaxRequestsPerSecond)
	}
	if c.MaxAnswerParts < 0 || c.MaxAnswerParts > 10 {
		bad("MaxAnswerParts %d must be between 1 and 10", c.MaxAnswerParts)
	}
	switch c.ThreadAutoArchive {
	case 0, 60, 1440, 4320, 10080:
	default:
		bad("ThreadAutoArchive %d must be 60, 1440, 4320 or 10080 minutes", c.ThreadAutoArchive)
	}
	if len(c.Backends) > maxChoices {
		bad("%d backends, but a slash command offers at most %d choices", len(c.Backends), maxChoices)
	}
	if c.APIBase != "" {
		if u, err := url.Parse(c.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("APIBase %q is not an http(s) base URL", c.APIBase)
		}
	}
	return errors.Join(errs...)
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
		EditBurst: 5,
		// That bucket is shared by every replica on the token: a replica
		// that starts holding a session's watch waits it out before its
		// first edit there (chat.TakeoverPacer).
		HandoffWindow:  c.TakeoverWait,
		MaxButtonValue: chat.MaxDiscordButtonValue,
		// A status card goes into one embed (4,096 characters of
		// description); this leaves room for Markdown the renderer adds.
		MaxCardChars: 3500,
		// A command awaiting approval shares that embed with the rest of
		// the card; past this it is attached as a file instead.
		MaxApprovalChars: 1800,
		MeasureCode:      CodeLen,
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
