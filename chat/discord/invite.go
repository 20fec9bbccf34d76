package discord

import (
	"net/url"
	"strconv"

	"github.com/bwmarrin/discordgo"
)

// Permissions are exactly the bot permissions the adapter uses: see
// channels (View Channel) and reply to messages (Read Message History),
// open session threads from mentions and forks (Create Public Threads),
// post and edit in channels and threads (Send Messages, Send Messages in
// Threads), show status cards as embeds (Embed Links) and upload long
// answers (Attach Files), and mark the message a turn answers with its
// state (Add Reactions). Its value is 309237763136.
const Permissions = discordgo.PermissionViewChannel | discordgo.PermissionSendMessages |
	discordgo.PermissionEmbedLinks | discordgo.PermissionAttachFiles | discordgo.PermissionReadMessageHistory |
	discordgo.PermissionCreatePublicThreads | discordgo.PermissionSendMessagesInThreads |
	discordgo.PermissionAddReactions // 👀 then ✅, ❌ or ⏹️ on the message a turn answers

// InviteURL is the OAuth2 URL that adds the bot to a server with the bot
// and applications.commands scopes and Permissions.
func InviteURL(appID string) string {
	q := url.Values{}
	q.Set("client_id", appID)
	q.Set("scope", "bot applications.commands")
	q.Set("permissions", strconv.FormatInt(Permissions, 10))
	return "https://discord.com/oauth2/authorize?" + q.Encode()
}
