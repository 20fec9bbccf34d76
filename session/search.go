package session

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
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
