package a2a

import (
	"sync"
	"testing"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
)

func TestTaskStoreBounds(t *testing.T) {
	t.Parallel()

	var mu sync.Mutex
	now := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)
	store := newTaskStore(2, time.Hour)
	store.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	msg := &a2atypes.Message{ID: "m", Role: a2atypes.MessageRoleUser, Parts: a2atypes.ContentParts{a2atypes.TextPart{Text: "x"}}}

	first, _ := store.create("agent", msg, nil)
	advance(time.Minute)
	second, _ := store.create("agent", msg, nil)
	third, _ := store.create("agent", msg, nil)

	// The oldest goes when the count is exceeded.
	_, ok := store.get("agent", first.id, nil)
	require.False(t, ok)
	_, ok = store.get("agent", second.id, nil)
	require.True(t, ok)

	// A task expires an hour after its creation.
	advance(time.Hour)
	_, ok = store.get("agent", second.id, nil)
	require.True(t, ok, "exactly one hour old")
	advance(time.Second)
	_, ok = store.get("agent", second.id, nil)
	require.False(t, ok)
	_, cerr := store.cancel("agent", third.id)
	require.Equal(t, CodeTaskNotFound, cerr.Code)
	require.Empty(t, store.byID)
	require.Zero(t, store.order.Len())

	// The caller's message is not modified; the stored copy carries the task's ids.
	require.Empty(t, msg.TaskID)
	task, ok := store.get("agent", mustCreate(store, msg).id, nil)
	require.True(t, ok)
	require.Equal(t, task.ID, task.History[0].TaskID)
	require.Equal(t, task.ContextID, task.History[0].ContextID)
}

func mustCreate(s *taskStore, msg *a2atypes.Message) *taskEntry {
	e, _ := s.create("agent", msg, nil)
	return e
}
