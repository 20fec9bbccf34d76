package docker

import (
	"context"
	"errors"
	"fmt"
	"net"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// userError is an error whose text is written for the person in the chat
// thread, while errors.Is still finds the sentinel (sandbox.ErrUnavailable
// or sandbox.ErrNotFound) and the underlying cause.
type userError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *userError) Error() string   { return e.msg }
func (e *userError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// unreachable reports whether err means the daemon could not be reached
// at all (socket missing, connection refused, daemon died mid-call).
func unreachable(err error) bool {
	if client.IsErrConnectionFailed(err) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// classify turns a client error into the backend's error vocabulary: an
// unreachable daemon wraps sandbox.ErrUnavailable, a missing container
// sandbox.ErrNotFound; everything else is wrapped with the op prefix.
func (b *Backend) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ue *userError
	switch {
	case errors.As(err, &ue):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("docker: %s: %w", op, err)
	case unreachable(err):
		return &userError{
			msg:      fmt.Sprintf("docker: daemon not reachable at %s: %v", b.cli.DaemonHost(), err),
			sentinel: sandbox.ErrUnavailable,
			cause:    err,
		}
	case cerrdefs.IsNotFound(err):
		return &userError{
			msg:      fmt.Sprintf("docker: %s: the sandbox container is gone: %v", op, err),
			sentinel: sandbox.ErrNotFound,
			cause:    err,
		}
	}
	return fmt.Errorf("docker: %s: %w", op, err)
}
