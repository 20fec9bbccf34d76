package workflows

import (
	"testing"

	"github.com/sandbot/sandbot/session"
)

// Someone who takes the owner's display name is told apart for the model.
func TestSpeakerTellsImpostorsApart(t *testing.T) {
	owner := session.User{ID: "U1", Name: "Alice"}
	for _, c := range []struct {
		u    session.User
		want string
	}{
		{owner, "Alice"},
		{session.User{ID: "U2", Name: "Bob"}, "Bob"},
		{session.User{ID: "U3", Name: "alice "}, "alice  (U3)"},
	} {
		if got := speaker(c.u, owner); got != c.want {
			t.Errorf("speaker(%+v) = %q, want %q", c.u, got, c.want)
		}
	}
}
