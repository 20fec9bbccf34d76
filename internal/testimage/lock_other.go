//go:build !unix

package testimage

import "context"

// lockFile is a no-op where flock is unavailable; concurrent imports then
// merely import the same image twice.
func lockFile(context.Context) (func(), error) { return func() {}, nil }
