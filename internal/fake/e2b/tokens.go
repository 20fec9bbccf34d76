package fakee2b

// AccessTokens returns the envd access token of every sandbox the fake
// holds, so a test can check that none of them leaked into places that
// must never hold a secret (workflow history, logs, handles).
func (s *Server) AccessTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb.token)
	}
	return out
}
