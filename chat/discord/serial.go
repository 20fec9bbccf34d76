package discord

import "sync"

// serial runs functions one at a time per key, in the order given, each
// key on its own goroutine that ends when its queue is empty.
type serial struct {
	mu sync.Mutex
	qs map[string][]func()
	wg sync.WaitGroup
}

func newSerial() *serial { return &serial{qs: map[string][]func(){}} }

func (s *serial) do(key string, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, running := s.qs[key]
	s.qs[key] = append(q, f)
	if running {
		return
	}
	s.wg.Add(1)
	go s.drain(key)
}

func (s *serial) drain(key string) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		q := s.qs[key]
		if len(q) == 0 {
			delete(s.qs, key)
			s.mu.Unlock()
			return
		}
		f := q[0]
		s.qs[key] = q[1:]
		s.mu.Unlock()
		f()
	}
}

// wait blocks until every queue is empty.
func (s *serial) wait() { s.wg.Wait() }
