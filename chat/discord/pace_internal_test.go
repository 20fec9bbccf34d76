package discord

import "testing"

// Interaction answers and webhook calls are outside Discord's global
// limit and are never held back behind card edits; everything else waits
// its turn.
func TestGlobalExempt(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v9/interactions/1400000000000000001/tok/callback":             true,
		"/api/v9/webhooks/1000000000000000001/tok/messages/@original":       true,
		"/api/v9/webhooks/1000000000000000001/tok":                          true,
		"/api/v9/channels/5000000000000000001/messages":                     false,
		"/api/v9/channels/5000000000000000001/messages/1300000000000000001": false,
		"/api/v9/applications/1000000000000000001/guilds/4/commands":        false,
	} {
		if got := globalExempt(path); got != want {
			t.Errorf("globalExempt(%q) = %v, want %v", path, got, want)
		}
	}
}
