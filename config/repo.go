package config

import (
	"net/mail"
	"os"
	"strings"

	"github.com/sandbot/sandbot/session"
)

// Repos configures the repository loop: which repositories sessions may
// start from, and the worker's git and GitHub credentials, which never
// leave the worker (no bot, sandbox or workflow history holds them).
type Repos struct {
	// Allow are the repositories sessions may clone (session.RepoAllowed
	// patterns); empty allows none.
	Allow []string
	// ChannelDefaults are "channel=owner/name[@branch]" pairs: the
	// repository a new session in that channel starts from when its first
	// message names none.
	ChannelDefaults []string
	// GitURL is the git host short names (owner/name) resolve against,
	// and the only host the worker sends its token to.
	GitURL string
	// APIURL is GitHub's REST API base (GitHub Enterprise: https://HOST/api/v3).
	APIURL string
	// Token is a GitHub token (fine-grained or classic) with contents and
	// pull-request write access.
	Token string
	// AppID, InstallationID and AppKeyFile configure a GitHub App instead
	// of a token: the worker mints an installation token per operation.
	AppID          string
	InstallationID int64
	AppKeyFile     string
	// CloneDepth is the history a clone fetches (0: all of it).
	CloneDepth int
	// Submodules clones submodules too.
	Submodules bool
	// MaxBytes caps a clone's size on disk.
	MaxBytes Bytes
	// Author is the commit author of /pr, "Name <email>".
	Author string
}

// ChannelRepo returns the default repository of a channel ID, if one is
// configured.
func (r Repos) ChannelRepo(channel string) (session.RepoSpec, bool) {
	for _, pair := range r.ChannelDefaults {
		ch, spec, ok := strings.Cut(pair, "=")
		if ok && strings.TrimSpace(ch) == channel {
			s, err := session.ParseRepoSpec(spec, r.GitURL)
			return s, err == nil
		}
	}
	return session.RepoSpec{}, false
}

var repoVars = []Var{
	{Name: "SANDBOT_REPOS_ALLOW", Readers: all,
		Doc:   "repositories sessions may start from: owner/name or host/owner/name patterns with * wildcards (acme/*, github.com/acme/widgets), or * for any; empty allows none",
		field: func(c *Config) any { return &c.Repos.Allow }},
	{Name: "SANDBOT_REPOS_CHANNEL_DEFAULTS", Readers: bot,
		Doc:   "channel=owner/name[@branch] pairs, comma-separated: the repository a new session in that channel starts from when its first message names none",
		field: func(c *Config) any { return &c.Repos.ChannelDefaults },
		check: func(c *Config, p *probs) {
			for _, pair := range c.Repos.ChannelDefaults {
				ch, spec, ok := strings.Cut(pair, "=")
				if !ok || strings.TrimSpace(ch) == "" {
					p.add("item %q is not channel=owner/name; use pairs such as C0123456789=acme/widgets@main", pair)
					continue
				}
				if _, err := session.ParseRepoSpec(spec, c.Repos.GitURL); err != nil {
					p.add("item %q: %v", pair, err)
				}
			}
		}},
	{Name: "SANDBOT_GIT_URL", Default: "https://github.com", Readers: all,
		Doc:   "git host owner/name repositories resolve against; the worker sends its token to this host only",
		field: func(c *Config) any { return &c.Repos.GitURL },
		check: func(c *Config, p *probs) { checkHTTPURL(p, c.Repos.GitURL, "https://github.com", false) }},
	{Name: "SANDBOT_GITHUB_API_URL", Default: "https://api.github.com", Readers: worker,
		Doc:   "GitHub REST API base URL for pull requests (GitHub Enterprise: https://HOST/api/v3)",
		field: func(c *Config) any { return &c.Repos.APIURL },
		check: func(c *Config, p *probs) { checkHTTPURL(p, c.Repos.APIURL, "https://api.github.com", false) }},
	{Name: "SANDBOT_GITHUB_TOKEN", Readers: worker, Secret: true,
		Doc:   "GitHub token the worker clones, pushes and opens pull requests with (contents and pull requests: write); never reaches a sandbox",
		field: func(c *Config) any { return &c.Repos.Token },
		check: func(c *Config, p *probs) {
			if c.Repos.Token != "" && c.Repos.AppID != "" {
				p.add("and SANDBOT_GITHUB_APP_ID are both set; use one: a token or a GitHub App")
			}
		}},
	{Name: "SANDBOT_GITHUB_APP_ID", Readers: worker,
		Doc:   "GitHub App ID (or client ID); with SANDBOT_GITHUB_APP_INSTALLATION_ID and SANDBOT_GITHUB_APP_KEY_FILE the worker mints installation tokens",
		field: func(c *Config) any { return &c.Repos.AppID },
		check: func(c *Config, p *probs) {
			if c.Repos.AppID != "" && (c.Repos.InstallationID == 0 || c.Repos.AppKeyFile == "") {
				p.add("is set without SANDBOT_GITHUB_APP_INSTALLATION_ID and SANDBOT_GITHUB_APP_KEY_FILE; use all three together")
			}
		}},
	{Name: "SANDBOT_GITHUB_APP_INSTALLATION_ID", Readers: worker,
		Doc:   "the GitHub App's installation ID on the organization",
		field: func(c *Config) any { return &c.Repos.InstallationID }},
	{Name: "SANDBOT_GITHUB_APP_KEY_FILE", Readers: worker,
		Doc:   "path of the GitHub App's private key (the .pem GitHub downloads)",
		field: func(c *Config) any { return &c.Repos.AppKeyFile },
		check: func(c *Config, p *probs) {
			if c.Repos.AppKeyFile == "" {
				return
			}
			if _, err := os.Stat(c.Repos.AppKeyFile); err != nil {
				p.add("cannot be read (%v); use the path of the App's .pem private key", err)
			}
		}},
	{Name: "SANDBOT_REPOS_CLONE_DEPTH", Default: "1", Readers: worker,
		Doc:   "commits of history a clone fetches (1: shallow; 0: all); /repo URL BRANCH full asks for all of it",
		field: func(c *Config) any { return &c.Repos.CloneDepth },
		check: func(c *Config, p *probs) {
			if c.Repos.CloneDepth < 0 {
				p.add("is %d; use 0 (all history) or a positive number of commits", c.Repos.CloneDepth)
			}
		}},
	{Name: "SANDBOT_REPOS_SUBMODULES", Default: "false", Readers: worker,
		Doc:   "clone submodules too (same credentials, same depth)",
		field: func(c *Config) any { return &c.Repos.Submodules }},
	{Name: "SANDBOT_REPOS_MAX_BYTES", Default: "1g", Readers: worker,
		Doc:   "largest clone on disk (work tree and .git); a bigger repository is refused",
		field: func(c *Config) any { return &c.Repos.MaxBytes },
		check: func(c *Config, p *probs) {
			if c.Repos.MaxBytes <= 0 {
				p.add("is not positive; use a size such as 1g")
			}
		}},
	{Name: "SANDBOT_GIT_AUTHOR", Default: "sandbot <sandbot@users.noreply.github.com>", Readers: worker,
		Doc:   "commit author of /pr as Name <email>; the asking user is added as Co-authored-by",
		field: func(c *Config) any { return &c.Repos.Author },
		check: func(c *Config, p *probs) {
			if _, err := mail.ParseAddress(c.Repos.Author); err != nil {
				p.add("%q is not Name <email>; use a value such as sandbot <sandbot@example.com>", c.Repos.Author)
			}
		}},
}
