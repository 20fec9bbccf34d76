package fakeslack

import "strings"

// User is a member of the fake workspace, as users.info describes them.
type User struct {
	ID string
	// Name is the handle (Slack's legacy username); default: the ID in
	// lower case, as in every payload that names a user.
	Name string
	// RealName is the full name (profile.real_name).
	RealName string
	// DisplayName is what Slack shows in messages (profile.display_name);
	// many members leave it empty.
	DisplayName string
	IsBot       bool
	Deleted     bool
}

// handleLocked is the username payloads carry for user id.
func (s *Server) handleLocked(id string) string {
	if u, ok := s.users[id]; ok && u.Name != "" {
		return u.Name
	}
	return strings.ToLower(id)
}

// usersInfoLocked answers users.info for the members in Options.Users.
func (s *Server) usersInfoLocked(req request) result {
	u, ok := s.users[req.form.Get("user")]
	if !ok {
		return errResult("user_not_found")
	}
	return okResult(map[string]any{"user": map[string]any{
		"id": u.ID, "team_id": s.opts.TeamID, "name": s.handleLocked(u.ID), "real_name": u.RealName,
		"deleted": u.Deleted, "is_bot": u.IsBot, "tz": "Europe/London", "tz_label": "Greenwich Mean Time",
		"profile": map[string]any{
			"real_name": u.RealName, "real_name_normalized": u.RealName,
			"display_name": u.DisplayName, "display_name_normalized": u.DisplayName,
			"team": s.opts.TeamID,
		},
	}})
}

// SetUser adds u to the workspace or replaces the member with its ID (a
// member who changes their display name, say).
func (s *Server) SetUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
	s.notifyLocked()
}
