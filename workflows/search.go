package workflows

import (
	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/workflow"
)

// index upserts the searchable fields that change during a session. It is a
// no-op unless the namespace has the attributes (Settings.Indexed), since an
// upsert of an unregistered attribute fails the workflow task.
func (s *sessionRun) index(ctx workflow.Context) {
	if !s.st.Settings.Indexed {
		return
	}
	want := indexed{Backend: s.st.Backend, Active: s.turnActive || s.awaitingPost(), Platform: s.st.Location.Platform, Channel: s.st.Location.Channel, Owner: s.st.Owner.ID, Parent: s.st.Parent}
	if s.lastIndex != nil && *s.lastIndex == want {
		return
	}
	err := workflow.UpsertTypedSearchAttributes(ctx,
		session.SAPlatform.ValueSet(want.Platform), session.SAChannel.ValueSet(want.Channel), session.SAOwner.ValueSet(want.Owner),
		session.SABackend.ValueSet(want.Backend), session.SAActiveTurn.ValueSet(want.Active), session.SAParent.ValueSet(want.Parent))
	if err != nil {
		s.log.Warn("upsert search attributes", "error", err)
		return
	}
	s.lastIndex = &want
}

type indexed struct {
	Backend, Platform, Channel, Owner, Parent string
	Active                                    bool
}
