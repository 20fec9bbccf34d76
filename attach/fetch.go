// Package attach downloads the files attached to chat messages, on the
// worker and never in a sandbox (see the trust boundary in
// docs/ARCHITECTURE.md): the bot signs each attachment's descriptor into
// the message, and the worker's SaveAttachments activity fetches it with a
// Fetcher, which talks only to the platforms' own file hosts and sends the
// Slack bot token to Slack's file host alone.
//
// Why the worker downloads and not the bot: the bytes must land in the
// sandbox's workspace, which only the worker that holds the sandbox can
// write, and passing them through Temporal would put megabytes into every
// session's history. Discord's CDN URLs are signed and need no credential;
// Slack's url_private_download needs the bot token (scope files:read),
// which the worker therefore reads too (SANDBOT_SLACK_BOT_TOKEN).
package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Hosts that serve attachments on the real platforms (https only).
var (
	slackHosts   = []string{"files.slack.com"}
	discordHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}
)

// Config configures a Fetcher.
type Config struct {
	// SlackToken is the bot token sent with downloads from Slack's file
	// host (files:read); without it Slack attachments are refused.
	SlackToken string
	// SlackBase and DiscordBase are the platforms' API bases when they are
	// not the real ones (SANDBOT_SLACK_API_BASE, SANDBOT_DISCORD_API_BASE:
	// the fakes in tests). Their origin (scheme, host and port, exactly) is
	// then a file host of that platform too, and the only address that is
	// not public that a download may reach.
	SlackBase, DiscordBase string
	// Timeout bounds one download (default 2 minutes).
	Timeout time.Duration
}

// ErrRefused marks an attachment URL the fetcher will not fetch.
var ErrRefused = errors.New("attachment URL refused")

// ErrTooLarge marks a download that passed its byte limit.
var ErrTooLarge = sandbox.ErrAttachmentTooLarge

// Fetcher downloads attachments. It is safe for concurrent use.
type Fetcher struct {
	cfg     Config
	origins map[string]string // configured origin -> platform
	client  *http.Client
}

// New builds a Fetcher. It fails when a configured base is not an http(s)
// URL.
func New(cfg Config) (*Fetcher, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	f := &Fetcher{cfg: cfg, origins: map[string]string{}}
	for platform, base := range map[string]string{"slack": cfg.SlackBase, "discord": cfg.DiscordBase} {
		if base == "" {
			continue
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("attach: %s base %q is not an http(s) URL", platform, base)
		}
		f.origins[origin(u)] = platform
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: f.checkDial}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would hide the address the guard checks
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
	}
	f.client = &http.Client{Transport: tr, CheckRedirect: f.checkRedirect}
	return f, nil
}

func origin(u *url.URL) string {
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(host), port)
}

// Check reports whether the attachment's URL may be fetched, and whether
// the Slack token goes with it. The answer depends only on the URL and
// the platform, never on DNS.
func (f *Fetcher) Check(a session.Attachment) (withToken bool, err error) {
	if a.URL == "" {
		return false, fmt.Errorf("%w: %s gave no download link for it", ErrRefused, a.Platform)
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return false, fmt.Errorf("%w: %q is not a URL", ErrRefused, a.URL)
	}
	return f.checkURL(a.Platform, u)
}

func (f *Fetcher) checkURL(platform string, u *url.URL) (withToken bool, err error) {
	if u.User != nil {
		return false, fmt.Errorf("%w: %s URLs carry no credentials", ErrRefused, platform)
	}
	if p, ok := f.origins[origin(u)]; ok {
		if p != platform {
			return false, fmt.Errorf("%w: %s is %s's file host, not %s's", ErrRefused, u.Host, p, platform)
		}
		return platform == "slack", nil
	}
	var hosts []string
	switch platform {
	case "slack":
		hosts = slackHosts
	case "discord":
		hosts = discordHosts
	default:
		return false, fmt.Errorf("%w: attachments come from Slack or Discord, not %q", ErrRefused, platform)
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range hosts {
		if host == h && u.Scheme == "https" && (u.Port() == "" || u.Port() == "443") {
			return platform == "slack", nil
		}
	}
	return false, fmt.Errorf("%w: %s attachments are downloaded from %s only, not from %s", ErrRefused, platform, strings.Join(hosts, " or "), u.Scheme+"://"+u.Host)
}

// checkRedirect applies the same rules to every redirect; the token is
// dropped by net/http when a redirect leaves the host.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return fmt.Errorf("%w: too many redirects", ErrRefused)
	}
	platform, _ := req.Context().Value(platformKey{}).(string)
	_, err := f.checkURL(platform, req.URL)
	return err
}

type platformKey struct{}

// checkDial refuses connections to addresses that are not public (the
// loopback Temporal frontend, the cloud metadata service, the private
// network), except to a configured fake's own address. It runs on the
// resolved address, so a host name that resolves somewhere private is
// refused too.
func (f *Fetcher) checkDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse address %q", ErrRefused, address)
	}
	for o := range f.origins {
		u, _ := url.Parse(o)
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.Unmap() == ap.Addr().Unmap() && u.Port() == fmt.Sprint(ap.Port()) {
			return nil
		}
	}
	ip := ap.Addr().Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || cgnat.Contains(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrRefused, ip)
	}
	return nil
}

// cgnat is the shared address space (RFC 6598), private in practice.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Fetch downloads the attachment into w, at most max bytes (ErrTooLarge
// beyond), and returns how many it wrote and the type the server named.
func (f *Fetcher) Fetch(ctx context.Context, a session.Attachment, max int64, w io.Writer) (int64, string, error) {
	withToken, err := f.Check(a)
	if err != nil {
		return 0, "", err
	}
	if withToken && f.cfg.SlackToken == "" {
		return 0, "", fmt.Errorf("%w: this worker has no Slack bot token (SANDBOT_SLACK_BOT_TOKEN) to download Slack files with", ErrRefused)
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, platformKey{}, a.Platform), f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return 0, "", fmt.Errorf("attach: %w", err)
	}
	if withToken {
		req.Header.Set("Authorization", "Bearer "+f.cfg.SlackToken)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return 0, "", err
		}
		return 0, "", fmt.Errorf("attach: download %s: %w", a.Name, scrubURL(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("attach: download %s: the file host answered %s", a.Name, resp.Status)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if a.Platform == "slack" && ct == "text/html" && !strings.HasPrefix(a.MimeType, "text/html") {
		// Slack answers a token without files:read with its sign-in page.
		return 0, "", fmt.Errorf("attach: download %s: Slack answered with a web page instead of the file; the app needs the files:read scope", a.Name)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, max+1))
	if err != nil {
		return n, ct, fmt.Errorf("attach: download %s: %w", a.Name, err)
	}
	if n > max {
		return n, ct, ErrTooLarge
	}
	return n, ct, nil
}

// scrubURL drops the URL from a transport error: Discord's carry signed
// query parameters, which are no secret of ours but need not be in chat.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
