package fakediscord

import (
	"testing"
	"time"
)

// TestSecondsUpNeverEarly: a reset is announced to the millisecond and
// never before it happens, since clients wait exactly what they are told.
func TestSecondsUpNeverEarly(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{299*time.Millisecond + 500*time.Microsecond, "0.300"}, // %.3f gave "0.299" or "0.300" by rounding
		{299*time.Millisecond + time.Nanosecond, "0.300"},
		{300 * time.Millisecond, "0.300"},
		{0, "0.001"},
		{-time.Second, "0.001"},
		{4*time.Second + 999*time.Millisecond + 1, "5.000"},
		{61*time.Second + 7*time.Millisecond, "61.007"},
	} {
		if got := secondsUp(c.d); got != c.want {
			t.Errorf("secondsUp(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
