package sandbox

import "testing"

// BeatAtOnce makes sandbox activities send their first heartbeat at the
// start, for the rest of t: tests that check what a beat carries need one
// from quick activities, which otherwise send none.
func BeatAtOnce(t testing.TB) {
	beatAtOnce.Store(true)
	t.Cleanup(func() { beatAtOnce.Store(false) })
}
