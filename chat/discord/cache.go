package discord

import "sync"

// recent is a bounded map that forgets its oldest entries first. It backs
// the seen-ID sets and the channel cache; a few thousand entries cover any
// gateway replay window.
type recent[V any] struct {
	mu    sync.Mutex
	max   int
	m     map[string]V
	order []string
}

func newRecent[V any](max int) *recent[V] {
	return &recent[V]{max: max, m: make(map[string]V, max)}
}

// add stores k=v and reports whether k was new.
func (r *recent[V]) add(k string, v V) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[k]; ok {
		r.m[k] = v
		return false
	}
	if len(r.order) >= r.max {
		delete(r.m, r.order[0])
		r.order = r.order[1:]
	}
	r.m[k] = v
	r.order = append(r.order, k)
	return true
}

func (r *recent[V]) get(k string) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	return v, ok
}

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
