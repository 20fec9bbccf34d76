// Package lru is the bounded cache of the chat front ends: seen event IDs,
// known session threads, channel lookups. Each of them must forget the
// least recently used entries first so a long-running bot's memory stays
// bounded, however many events and threads it sees.
package lru

import (
	"container/list"
	"sync"
)

// Cache is a map of at most Max entries that drops the least recently
// used one when full. Get, Put and Add count as uses. It is safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	order *list.List          // front: most recently used; values are *entry
	items map[K]*list.Element // key → element of order
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// New returns an empty cache of at most size entries (at least one).
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{max: max(size, 1), order: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value of k, if present, and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Put stores k=v, replacing any value k had.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.Value.(*entry[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	c.insertLocked(k, v)
}

// Add stores k=v unless k is present, and reports whether it was new: a
// cache of struct{} values is a bounded "seen before?" set.
func (c *Cache[K, V]) Add(k K, v V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return false
	}
	c.insertLocked(k, v)
	return true
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache[K, V]) insertLocked(k K, v V) {
	c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*entry[K, V]).key)
	}
}
