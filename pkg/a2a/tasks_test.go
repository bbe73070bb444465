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

	first, _ := store.create("agent", Owner{}, msg, nil)
	advance(time.Minute)
	second, _ := store.create("agent", Owner{}, msg, nil)
	third, _ := store.create("agent", Owner{}, msg, nil)

	// The oldest goes when the count is exceeded.
	_, ok := store.get("agent", Owner{}, first.id, nil)
	require.False(t, ok)
	_, ok = store.get("agent", Owner{}, second.id, nil)
	require.True(t, ok)

	// A task expires an hour after its creation.
	advance(time.Hour)
	_, ok = store.get("agent", Owner{}, second.id, nil)
	require.True(t, ok, "exactly one hour old")
	advance(time.Second)
	_, ok = store.get("agent", Owner{}, second.id, nil)
	require.False(t, ok)
	_, cerr := store.cancel("agent", Owner{}, third.id)
	require.Equal(t, CodeTaskNotFound, cerr.Code)
	require.Empty(t, store.byID)
	require.Zero(t, store.order.Len())

	// The caller's message is not modified; the stored copy carries the task's ids.
	require.Empty(t, msg.TaskID)
	task, ok := store.get("agent", Owner{}, mustCreate(store, msg).id, nil)
	require.True(t, ok)
	require.Equal(t, task.ID, task.History[0].TaskID)
	require.Equal(t, task.ContextID, task.History[0].ContextID)
}

func mustCreate(s *taskStore, msg *a2atypes.Message) *taskEntry {
	e, _ := s.create("agent", Owner{}, msg, nil)
	return e
}

// TestTaskOwnership (issue 17, item 6): a task answers only its creating key, a key of the
// creator's team, or the master key; to anyone else tasks/get and tasks/cancel are exactly
// the not-found of an unknown id.
func TestTaskOwnership(t *testing.T) {
	t.Parallel()
	store := newTaskStore(10, time.Hour)
	msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "hi"})
	creator := Owner{Key: "hash-b", Team: "team-1"}
	e, _ := store.create("agent", creator, msg, nil)

	for name, who := range map[string]Owner{
		"creator": creator, "same team": {Key: "hash-c", Team: "team-1"}, "master key": {Admin: true},
	} {
		_, ok := store.get("agent", who, e.id, nil)
		require.True(t, ok, name)
	}
	for name, who := range map[string]Owner{
		"other key": {Key: "hash-a"}, "other team": {Key: "hash-a", Team: "team-2"},
		"no key": {}, "creator's team id on no team": {Key: "hash-a", Team: ""},
	} {
		_, ok := store.get("agent", who, e.id, nil)
		require.False(t, ok, name)
		_, cerr := store.cancel("agent", who, e.id)
		require.Equal(t, taskNotFound(e.id), cerr, name)
	}
	_, cerr := store.cancel("agent", Owner{Key: "hash-c", Team: "team-1"}, e.id)
	require.Nil(t, cerr)
}
