package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Search attributes that make sessions discoverable through Temporal
// visibility (/sessions, and the bot's restart scan for active turns).
var (
	SAPlatform   = temporal.NewSearchAttributeKeyKeyword("SandbotPlatform")
	SAChannel    = temporal.NewSearchAttributeKeyKeyword("SandbotChannel")
	SAOwner      = temporal.NewSearchAttributeKeyKeyword("SandbotOwner")
	SABackend    = temporal.NewSearchAttributeKeyKeyword("SandbotBackend")
	SAActiveTurn = temporal.NewSearchAttributeKeyBool("SandbotActiveTurn")
	SAParent     = temporal.NewSearchAttributeKeyKeyword("SandbotParent")
)

// SearchAttributeTypes lists the custom search attributes to register on a
// namespace, by name.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAPlatform.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAChannel.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAOwner.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SABackend.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAActiveTurn.GetName(): enumspb.INDEXED_VALUE_TYPE_BOOL,
		SAParent.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// StartSearchAttributes are set when a session starts.
func StartSearchAttributes(in SessionInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		SAPlatform.ValueSet(in.Location.Platform),
		SAChannel.ValueSet(in.Location.Channel),
		SAOwner.ValueSet(in.Owner.ID),
		SABackend.ValueSet(in.Backend),
		SAActiveTurn.ValueSet(false),
		SAParent.ValueSet(in.Parent),
	)
}

// index upserts the searchable fields that change during a session. It is a
// no-op unless the namespace has the attributes (Settings.Indexed), since an
// upsert of an unregistered attribute fails the workflow task.
func (s *session) index(ctx workflow.Context) {
	if !s.st.Settings.Indexed {
		return
	}
	want := indexed{Backend: s.st.Backend, Active: s.turnActive, Platform: s.st.Location.Platform, Channel: s.st.Location.Channel, Owner: s.st.Owner.ID, Parent: s.st.Parent}
	if s.lastIndex != nil && *s.lastIndex == want {
		return
	}
	err := workflow.UpsertTypedSearchAttributes(ctx,
		SAPlatform.ValueSet(want.Platform), SAChannel.ValueSet(want.Channel), SAOwner.ValueSet(want.Owner),
		SABackend.ValueSet(want.Backend), SAActiveTurn.ValueSet(want.Active), SAParent.ValueSet(want.Parent))
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
