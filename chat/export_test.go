package chat

// Internals the black-box tests (package chat_test) check directly.
var (
	CardLen           = cardLen
	CommandLine       = commandLine
	OutputTail        = outputTail
	ResolveDigest     = resolveDigest
	InternalErrorText = internalErrorText
	DigestPrefix      = digestPrefix
	RenderHistory     = renderHistory
	ContextText       = contextText
)
