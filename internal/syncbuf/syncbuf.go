// Package syncbuf is a bytes.Buffer that a child process's output can be
// written to while the test or suite that started it reads it: os/exec
// copies a child's stdout and stderr in goroutines of its own, so a plain
// buffer would race with every read.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent writers and readers. The zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
