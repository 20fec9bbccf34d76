package session_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sandbot/sandbot/session"
)

// The refused replica reads the recorded card out of the refusal however
// the client wrapped it (the bot's Temporal client puts the validator's
// message inside its own), refs with quotes and spaces included.
func TestRecordedCardReadsTheRefusal(t *testing.T) {
	for _, ref := range []string{"1700000000.000300", "1299999999999999999", `card "7" of C1`} {
		err := fmt.Errorf("temporal: chat_ref session/x: %w", errors.New(session.CardRefusal(3, ref)))
		if got, ok := session.RecordedCard(err); !ok || got != ref {
			t.Errorf("RecordedCard(%v) = %q, %v; want %q", err, got, ok, ref)
		}
	}
	for _, err := range []error{nil, errors.New("turn 3 is not the current turn (4)"), errors.New(session.CardRecordedAlready + " but no ref")} {
		if got, ok := session.RecordedCard(err); ok {
			t.Errorf("RecordedCard(%v) = %q, true; want no ref", err, got)
		}
	}
}
