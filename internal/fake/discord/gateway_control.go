package fakediscord

// Gateway controls for tests: the ways a real gateway disturbs a bot.

// DropConnections cuts every gateway connection at the TCP level, without
// a close frame, as a network failure would. Sessions stay resumable and
// events dispatched meanwhile are replayed on RESUME.
func (s *Server) DropConnections() {
	s.gw.closeAll()
}

// SendReconnect sends op 7 Reconnect on every connection; clients should
// close and RESUME.
func (s *Server) SendReconnect() {
	s.gw.broadcast(map[string]any{"op": 7, "d": nil, "s": nil, "t": nil}, false)
}

// InvalidateSession sends op 9 Invalid Session on every connection. When
// resumable is false the sessions are ended, so the client must IDENTIFY
// again and events it missed are lost.
func (s *Server) InvalidateSession(resumable bool) {
	s.gw.broadcast(map[string]any{"op": 9, "d": resumable, "s": nil, "t": nil}, !resumable)
}

// ReplayOnResumeFrom makes the next successful RESUME replay every event
// after seq, whatever sequence the client claims. With a seq the client has
// already processed, this simulates Discord redelivering events.
func (s *Server) ReplayOnResumeFrom(seq int64) {
	s.gw.mu.Lock()
	s.gw.replayFrom = seq
	s.gw.mu.Unlock()
}

// GatewayStats returns the gateway's counters.
func (s *Server) GatewayStats() GatewayStats {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.stats
}

// Connected counts connections attached to a live session (identified or
// resumed and not yet closed).
func (s *Server) Connected() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	n := 0
	for c := range s.gw.conns {
		if c.sess != nil && c.sess.conn == c && !c.sess.dead {
			n++
		}
	}
	return n
}

// LastSeq is the highest sequence number dispatched in any session.
func (s *Server) LastSeq() int64 {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	var max int64
	for _, sess := range s.gw.sessions {
		if sess.seq > max {
			max = sess.seq
		}
	}
	return max
}

func (g *gateway) broadcast(v map[string]any, end bool) {
	g.mu.Lock()
	var conns []*gwConn
	for c := range g.conns {
		conns = append(conns, c)
		if end && c.sess != nil {
			c.sess.dead = true
		}
	}
	g.mu.Unlock()
	for _, c := range conns {
		_ = c.write(v)
	}
	g.s.notify()
}

// guildPayloads returns READY's unavailable guild stubs and the
// GUILD_CREATE payloads (channels, active threads, roles) that follow.
func (s *Server) guildPayloads() ([]any, []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stubs, creates []any
	for _, g := range s.guilds {
		stubs = append(stubs, map[string]any{"id": g.ID, "unavailable": true})
		var chans, threads []Channel
		for _, c := range s.channels {
			if c.GuildID != g.ID {
				continue
			}
			if c.IsThread() {
				threads = append(threads, *c)
			} else {
				chans = append(chans, *c)
			}
		}
		sortChannels(chans)
		sortChannels(threads)
		cw := make([]any, len(chans))
		for i, c := range chans {
			cw[i] = c.wire()
		}
		tw := make([]any, len(threads))
		for i, c := range threads {
			tw[i] = c.wire()
		}
		roles := []any{map[string]any{"id": g.ID, "name": "@everyone", "permissions": "0", "position": 0, "color": 0, "hoist": false, "managed": false, "mentionable": false}}
		for i, r := range g.Roles {
			roles = append(roles, map[string]any{"id": r.ID, "name": r.Name, "permissions": "0", "position": i + 1, "color": 0, "hoist": false, "managed": false, "mentionable": false})
		}
		creates = append(creates, map[string]any{
			"id": g.ID, "name": g.Name, "unavailable": false, "member_count": 2, "large": false,
			"joined_at": "2024-01-01T00:00:00Z", "owner_id": "7000000000000000000",
			"channels": cw, "threads": tw, "roles": roles, "members": []any{}, "voice_states": []any{},
			"presences": []any{}, "emojis": []any{}, "stickers": []any{}, "features": []any{},
		})
	}
	return stubs, creates
}
