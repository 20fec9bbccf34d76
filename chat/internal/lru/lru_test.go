package lru

import (
	"fmt"
	"sync"
	"testing"
)

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](3)
	for i, k := range []string{"a", "b", "c"} {
		c.Put(k, i)
	}
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Put("d", 3) // evicts b
	if _, ok := c.Get("b"); ok {
		t.Fatal("b was not evicted")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("%s was evicted", k)
		}
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("Len = %d", n)
	}
	c.Put("a", 10)
	if v, _ := c.Get("a"); v != 10 {
		t.Fatalf("Put did not replace: %d", v)
	}
	c.Remove("a")
	if _, ok := c.Get("a"); ok || c.Len() != 2 {
		t.Fatal("Remove did not remove")
	}
}

func TestCacheAddIsASeenSet(t *testing.T) {
	c := New[string, struct{}](2)
	if !c.Add("e1", struct{}{}) || c.Add("e1", struct{}{}) {
		t.Fatal("Add must report only the first time")
	}
	c.Add("e2", struct{}{})
	c.Add("e3", struct{}{}) // evicts e1
	if !c.Add("e1", struct{}{}) {
		t.Fatal("an evicted key counts as new")
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := New[string, int](100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint(g, i%150)
				c.Put(k, i)
				c.Get(k)
				c.Add(k, i)
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 100 {
		t.Fatalf("Len = %d beyond the bound", n)
	}
}
