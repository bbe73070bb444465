package provider

import (
	"sync"
	"sync/atomic"
)

// lazyValue is a value found on first use — Application Default Credentials for Vertex AI,
// the AWS default credential chain for Bedrock — whose failures are never kept: a failed
// lookup (a credentials file not mounted yet, a metadata endpoint briefly down) is tried
// again on the next call, and the first success is kept for good (what it yields, a token
// source or a credentials cache, then refreshes itself before expiry). Reads after a success
// are one atomic load, no lock; lookups are serialised so a burst of calls does one at a time.
type lazyValue[T any] struct {
	find func() (T, error)
	v    atomic.Pointer[T]
	mu   sync.Mutex
}

func (l *lazyValue[T]) get() (T, error) {
	if p := l.v.Load(); p != nil {
		return *p, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.v.Load(); p != nil {
		return *p, nil
	}
	v, err := l.find()
	if err != nil {
		var zero T
		return zero, err
	}
	l.v.Store(&v)
	return v, nil
}
