package chat

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/sandbot/sandbot/session"
)

// MaxDiscordButtonValue is the longest approval value that fits Discord's
// 100-character custom_id when the adapter builds it as
// actionID + ":" + value with the longest action ID (ActionApproveAlways).
const MaxDiscordButtonValue = 100 - len(ActionApproveAlways) - 1

// Approval values come in three forms, tried in this order by
// EncodeApprovalCompact; all are printable ASCII without spaces or ':'.
//
//	1.<platform>.<workspace>.<channel>.<thread>.<call>  full: names the session
//	2.<call>                                           relative to the clicked thread
//	3.<digest>                                         relative, call ID digested (18 chars)
//
// Platforms slack/discord/console are one letter; decimal IDs (Discord
// snowflakes) are written in base 62 after '#'; other parts are escaped
// ('%', '.', '#', '~' as %XX). A Discord approval value for a call ID of up
// to ~40 characters uses the full form; longer ones fall back to form 2 or
// 3, which need the Action's Thread to name the session.
const (
	approvalFull     = "1"
	approvalRelative = "2"
	approvalDigest   = "3"
	// digestPrefix marks a call ID that DecodeApproval could only return as
	// a digest; HandleAction resolves it against the session's turn state.
	digestPrefix = "#"
)

var platformCodes = map[string]string{"slack": "s", "discord": "d", "console": "c"}

// EncodeApproval returns the full form of an approval button value for the
// call callID of session workflowID. It has no length limit; use
// EncodeApprovalCompact where the platform has one.
func EncodeApproval(workflowID, callID string) string {
	loc, err := session.ParseID(workflowID)
	if err != nil {
		// Not a session ID: only the thread-relative form can carry it.
		return approvalRelative + "." + escapePart(callID)
	}
	plat, ok := platformCodes[loc.Platform]
	if !ok {
		plat = "~" + escapePart(loc.Platform)
	}
	return strings.Join([]string{approvalFull, plat, compactPart(loc.Workspace), compactPart(loc.Channel),
		compactPart(loc.Thread), escapePart(callID)}, ".")
}

// EncodeApprovalCompact returns the shortest-needed approval value of at
// most max characters (max <= 0: no limit): the full form if it fits, else
// the thread-relative form, else the digest form (always 18 characters).
// It fails only if max is below 18.
func EncodeApprovalCompact(workflowID, callID string, max int) (string, error) {
	if v := EncodeApproval(workflowID, callID); max <= 0 || len(v) <= max {
		return v, nil
	}
	if v := approvalRelative + "." + escapePart(callID); len(v) <= max {
		return v, nil
	}
	if v := approvalDigest + "." + callDigest(callID); len(v) <= max {
		return v, nil
	}
	return "", fmt.Errorf("chat: approval value cannot fit %d characters (the shortest form needs %d)", max, 2+len(callDigest(callID)))
}

// DecodeApproval parses a value made by EncodeApproval or
// EncodeApprovalCompact. workflowID is "" for the thread-relative forms:
// the session is then the thread the click came from. For the digest form
// callID is "#" followed by the digest, which Core.HandleAction resolves.
func DecodeApproval(v string) (workflowID, callID string, err error) {
	parts := strings.Split(v, ".")
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("chat: approval value %q is not valid: %s", truncate(v, 40), why)
	}
	switch parts[0] {
	case approvalFull:
		if len(parts) != 6 {
			return bad("want 6 dot-separated parts")
		}
		var loc session.Location
		switch p := parts[1]; {
		case strings.HasPrefix(p, "~"):
			loc.Platform, err = unescapePart(p[1:])
		default:
			for name, code := range platformCodes {
				if code == p {
					loc.Platform = name
				}
			}
			if loc.Platform == "" {
				return bad("unknown platform code " + p)
			}
		}
		if err != nil {
			return bad(err.Error())
		}
		fields := []*string{&loc.Workspace, &loc.Channel, &loc.Thread, &callID}
		for i, dst := range fields {
			if *dst, err = expandPart(parts[i+2]); err != nil {
				return bad(err.Error())
			}
		}
		if callID == "" {
			return bad("empty call ID")
		}
		return loc.ID(), callID, nil
	case approvalRelative:
		if len(parts) != 2 || parts[1] == "" {
			return bad("want 2.<call>")
		}
		callID, err = unescapePart(parts[1])
		if err != nil {
			return bad(err.Error())
		}
		return "", callID, nil
	case approvalDigest:
		if len(parts) != 2 || parts[1] == "" {
			return bad("want 3.<digest>")
		}
		return "", digestPrefix + parts[1], nil
	}
	return bad("unknown form " + parts[0])
}

// callDigest is a short, stable digest of a call ID.
func callDigest(callID string) string {
	sum := sha256.Sum256([]byte(callID))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// resolveDigest finds the call ID whose digest is d among the session's
// pending approval and tool calls.
func resolveDigest(ts session.TurnState, d string) (string, bool) {
	if ts.Pending != nil && callDigest(ts.Pending.CallID) == d {
		return ts.Pending.CallID, true
	}
	for _, c := range ts.ToolCalls {
		if callDigest(c.CallID) == d {
			return c.CallID, true
		}
	}
	return "", false
}

// compactPart writes a canonical decimal (no sign, no leading zero) in
// base 62 after '#', and escapes anything else.
func compactPart(s string) string {
	if len(s) < 4 || len(s) > 40 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return escapePart(s)
	}
	n, _ := new(big.Int).SetString(s, 10)
	return "#" + n.Text(62)
}

func expandPart(s string) (string, error) {
	if !strings.HasPrefix(s, "#") {
		return unescapePart(s)
	}
	n, ok := new(big.Int).SetString(s[1:], 62)
	if !ok || n.Sign() < 0 {
		return "", fmt.Errorf("bad number %q", s)
	}
	return n.Text(10), nil
}

var partEscaper = strings.NewReplacer("%", "%25", ".", "%2E", "#", "%23", "~", "%7E")

func escapePart(s string) string { return partEscaper.Replace(s) }

func unescapePart(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("truncated escape")
		}
		switch s[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "2E":
			b.WriteByte('.')
		case "23":
			b.WriteByte('#')
		case "7E":
			b.WriteByte('~')
		default:
			return "", fmt.Errorf("unknown escape %q", s[i:i+3])
		}
		i += 2
	}
	return b.String(), nil
}

// actionVerbs name what each approval action does, for refusals.
var actionVerbs = map[string]string{
	ActionApprove:       "approve",
	ActionApproveAlways: "approve",
	ActionReject:        "reject",
}

// MayDecide says whether a.User may take the approval action a, as far as
// the bot can tell, and if not returns the refusal to show them (ephemeral,
// worded for the action). Adapters call it before anything the user would
// have to fill in for nothing, such as the Reject modal.
//
// The bot knows who may decide only approximately: the session's owner
// (from its Info) and the approvers and approver roles of new sessions.
// The workflow still has the final word. If the session cannot be asked,
// the action is let through for the workflow to judge.
func (c *Core) MayDecide(ctx context.Context, a Action) (refusal string) {
	if err := c.authorize(ctx, a.User, a.Thread); err != nil {
		return UserMessage(err)
	}
	id, _, err := DecodeApproval(a.Value)
	if err != nil || id == "" {
		id = a.Thread.ID()
	}
	if a.User.ID == "" {
		return "You may not decide this approval: the click carried no user."
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	info, err := c.s.Info(cctx, id)
	if err != nil {
		c.log.Info("may decide: session info unavailable; the workflow will judge", "workflow_id", id, "err", err)
		return ""
	}
	if c.mayApprove(info.Owner, a.User) {
		return ""
	}
	verb := orDefault(actionVerbs[a.ID], "decide")
	owner := orDefault(info.Owner.Name, info.Owner.ID)
	c.log.Info("approval refused before asking the session", "workflow_id", id, "action", a.ID, "user", a.User.ID)
	return fmt.Sprintf("You may not %s commands in this session: only its owner (%s) and approvers may.", verb, owner)
}

// mayApprove mirrors the workflow's rule with what the bot knows: the
// owner, the configured approvers, holders of an approver role.
func (c *Core) mayApprove(owner, u User) bool {
	if u.ID == owner.ID {
		return true
	}
	st := c.cfg.Start.Settings
	if slices.Contains(st.Approvers, u.ID) {
		return true
	}
	for _, r := range u.Roles {
		if slices.Contains(st.ApproverRoles, r) {
			return true
		}
	}
	return false
}

// actionDecisions routes approval action IDs (the button IDs) to
// decisions; it is the one place action IDs are interpreted.
var actionDecisions = map[string]session.Decision{
	ActionApprove:       session.DecisionApprove,
	ActionApproveAlways: session.DecisionApproveAlways,
	ActionReject:        session.DecisionReject,
}

// HandleAction answers an approval button. The decision goes to the
// session's approve update; a rejection by its validator (the user may not
// approve, the approval expired or was already decided) is answered with
// a.Reply (ephemeral) and changes nothing else. On success the session's
// turn watcher re-renders the card (showing who decided) promptly. A copy
// of a click whose decision the session took already (Discord delivers
// each click to every replica; a.Click names it) is a success too, so
// whichever replica answers first, the user reads no refusal.
//
// Adapters call it after acknowledging the click. It returns an error only
// for internal failures, after telling the user something went wrong.
func (c *Core) HandleAction(ctx context.Context, p Poster, a Action) error {
	reply := func(text string) {
		if a.Reply == nil {
			c.log.Warn("action has no Reply; dropping answer", "action", a.ID, "text", text)
			return
		}
		if err := a.Reply(ctx, text); err != nil {
			c.log.Warn("ephemeral reply failed", "action", a.ID, "err", err)
		}
	}
	if a.ID == ActionStop {
		return c.stopButton(ctx, p, a, reply)
	}
	decision, ok := actionDecisions[a.ID]
	if !ok {
		reply(fmt.Sprintf("This button (%q) is not one this bot knows.", a.ID))
		return nil
	}
	if refusal := c.MayDecide(ctx, a); refusal != "" {
		reply(refusal)
		return nil
	}
	id, callID, err := DecodeApproval(a.Value)
	if err != nil {
		reply("This button's data is damaged; use the buttons on the latest status message.")
		c.log.Warn("bad approval value", "err", err)
		return nil
	}
	if id == "" {
		if a.Thread == (Thread{}) {
			reply("This button does not say which session it belongs to; use the buttons on the latest status message.")
			return nil
		}
		id = a.Thread.ID()
	}
	loc, err := session.ParseID(id)
	if err != nil {
		reply("This button names no session; use the buttons on the latest status message.")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	if strings.HasPrefix(callID, digestPrefix) {
		ts, err := c.s.TurnState(cctx, id)
		if err != nil {
			reply(UserMessage(err))
			return c.internal(err, "approval: turn state", id)
		}
		full, ok := resolveDigest(ts, strings.TrimPrefix(callID, digestPrefix))
		if !ok {
			reply("This approval is no longer pending.")
			return nil
		}
		callID = full
	}
	res, err := c.s.Approve(cctx, id, session.ApproveRequest{CallID: callID, Decision: decision, Reason: a.Reason, User: a.User, Click: a.Click})
	if err != nil {
		reply(UserMessage(err))
		return c.internal(err, "approval", id)
	}
	if res.Repeat {
		// Another replica's copy of this click decided: nothing to tell
		// the user but what the card shows, as for the first copy.
		c.log.Info("approval decided by another replica's copy of the click", "workflow_id", id, "call_id", callID, "click", a.Click)
	} else {
		c.log.Info("approval decided", "workflow_id", id, "call_id", callID, "decision", decision, "user", a.User.ID)
	}
	c.nudge(ctx, p, loc)
	return nil
}

// stopButton answers a running card's Stop button: what /stop does, for
// anyone who may use the bot in the thread, answered privately (the card
// itself turns into "Stopping…", then "Stopped by …").
func (c *Core) stopButton(ctx context.Context, p Poster, a Action, reply func(string)) error {
	id := a.Value
	if id == "" {
		if a.Thread == (Thread{}) {
			reply("This button does not say which session it belongs to; use /stop in the thread.")
			return nil
		}
		id = a.Thread.ID()
	}
	loc, err := session.ParseID(id)
	if err != nil {
		reply("This button names no session; use /stop in the thread.")
		return nil
	}
	if a.Thread != (Thread{}) && a.Thread.ID() != id {
		reply("This button belongs to another thread's session; use /stop there.")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.LongCallTimeout)
	defer cancel()
	res, err := c.s.Stop(cctx, id, session.StopRequest{User: a.User})
	if err != nil {
		reply(UserMessage(err))
		return c.internal(err, "stop button", id)
	}
	c.nudge(ctx, p, loc)
	if !res.Stopped {
		reply("No turn is running.")
		return nil
	}
	c.log.Info("turn stopped", "workflow_id", id, "turn", res.Turn, "user", a.User.ID)
	reply(fmt.Sprintf("Stopped turn %d.", res.Turn))
	return nil
}
