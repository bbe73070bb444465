package a2a

import (
	"context"
	"encoding/json"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
)

// Tasks on every replica (API.md "Agents and A2A": tasks/get and tasks/cancel work on every
// replica). The replica that runs a message/stream keeps the task in memory, as before, and
// also stores it in a shared table (gateway.a2a_tasks, a non-notifying table: DESIGN.md
// "Non-notifying shared tables"):
//   - synchronously when the task is created and when it ends (so a tasks/get anywhere right
//     after the stream's first or final event sees it), and at most every TaskSyncInterval in
//     between (the text streamed so far), never per chunk;
//   - tasks/get on a replica that does not run the task reads the row; tasks/cancel there
//     marks the row canceled (if still submitted or working) and answers at once;
//   - the running replica polls the rows of the tasks it runs every TaskSyncInterval (one
//     query for all of them, none when it runs none) and stops the stream of any whose cancel
//     was requested: a cancel on B stops the stream on A within about TaskSyncInterval.
//
// Polling was chosen over a notification channel: it costs one indexed query per interval per
// replica running streams, puts no NOTIFY (a global lock at commit) on any write, and needs
// no listener of its own.
//
// Bounds: a stored task keeps at most MaxStoredHistory history messages and MaxStoredText
// bytes of artifact text (the replica running it keeps everything in memory); the table keeps
// at most MaxStoredTasks rows and none older than StoredTaskTTL (pruned every minute).
const (
	TaskSyncInterval = 250 * time.Millisecond
	MaxStoredHistory = 20
	MaxStoredText    = 64 << 10
	MaxStoredTasks   = 100000
	StoredTaskTTL    = 24 * time.Hour
)

// StoredTask is a task as the shared table holds it: Task is the A2A Task object (JSON);
// OwnerKey and OwnerTeam are its creator (Owner.Key, Owner.Team), never part of Task.
type StoredTask struct {
	ID, AgentID, State  string
	OwnerKey, OwnerTeam string
	Task                []byte
	// Updated is the row's last update (set by ListTasks only; the ListTasks order and cursor).
	Updated time.Time
}

// SharedTasks is the shared task table (PGTasks implements it over pkg/store).
type SharedTasks interface {
	SaveTask(ctx context.Context, t StoredTask) error
	// LoadTask returns found=false when there is no such task.
	LoadTask(ctx context.Context, id string) (t StoredTask, found bool, err error)
	// CancelTask cancels agentID's task id if still submitted or working (status replaces its
	// status) and returns it; found=false: no such task of that agent; canceled=false: it is
	// in a terminal state (returned as is).
	CancelTask(ctx context.Context, agentID, id string, status []byte) (t StoredTask, found, canceled bool, err error)
	// CancelRequested returns which of ids were canceled elsewhere.
	CancelRequested(ctx context.Context, ids []string) ([]string, error)
	// PruneTasks applies the table's bounds (StoredTaskTTL, MaxStoredTasks).
	PruneTasks(ctx context.Context) error
	// ListTasks returns up to q.Limit of q.AgentID's tasks that q.Caller may access
	// (Owner.mayAccess), filtered by q, ordered by last update then id, both descending,
	// starting after q.After; Total counts the matches ignoring q.After and q.Limit.
	ListTasks(ctx context.Context, q TaskQuery) (TaskPage, error)
}

// ShareTasks stores this handler's tasks in st so every replica can answer tasks/get and
// tasks/cancel, and runs the sync loop (periodic saves, cancel polling, pruning) until ctx
// ends. Call it once, before serving.
func (h *Handler) ShareTasks(ctx context.Context, st SharedTasks) {
	h.tasks.shared = st
	h.tasks.log = h.log
	go h.tasks.syncLoop(ctx)
}

// syncLoop runs every TaskSyncInterval while tasks are dirty or running here, and otherwise
// sleeps until a task is created or changed (poke) or the next prune is due: an idle replica's
// loop wakes once a minute, not four times a second.
func (s *taskStore) syncLoop(ctx context.Context) {
	var lastPrune time.Time
	for {
		s.mu.Lock()
		busy := len(s.dirty) > 0 || s.anyRunning()
		s.mu.Unlock()
		wait, wake := TaskSyncInterval, (<-chan struct{})(nil)
		if !busy {
			wait, wake = max(0, time.Until(lastPrune.Add(time.Minute))), s.wake
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-wake:
			t.Stop()
			continue // a task was created or changed: look again
		}
		s.mu.Lock()
		dirty := make([]StoredTask, 0, len(s.dirty))
		for _, e := range s.dirty {
			dirty = append(dirty, e.stored())
		}
		clear(s.dirty)
		var running []string
		for _, e := range s.byID {
			if !e.status.State.Terminal() {
				running = append(running, e.id)
			}
		}
		s.mu.Unlock()
		for _, d := range dirty {
			s.saveStored(ctx, d)
		}
		if len(running) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ids, err := s.shared.CancelRequested(cctx, running)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.log.Debug().Err(err).Msg("poll a2a task cancels")
			}
			for _, id := range ids {
				s.cancelLocal(id)
			}
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			if err := s.shared.PruneTasks(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug().Err(err).Msg("prune a2a tasks")
			}
		}
	}
}

// stored is the task as the shared table keeps it (bounded). Caller holds taskStore.mu.
func (e *taskEntry) stored() StoredTask {
	hl := MaxStoredHistory
	t := e.snapshot(&hl)
	if len(t.Artifacts) == 1 && e.text.Len() > MaxStoredText {
		t.Artifacts[0].Parts = a2atypes.ContentParts{a2atypes.TextPart{Text: e.text.String()[:MaxStoredText]}}
	}
	b, _ := json.Marshal(t)
	return StoredTask{ID: e.id, AgentID: e.agentID, State: string(e.status.State),
		OwnerKey: e.owner.Key, OwnerTeam: e.owner.Team, Task: b}
}

// save stores e now (creation, end, cancel). A failure is logged: the task stays served here.
func (s *taskStore) save(e *taskEntry) {
	if s.shared == nil {
		return
	}
	s.mu.Lock()
	st := e.stored()
	delete(s.dirty, e.id)
	s.mu.Unlock()
	s.saveStored(context.Background(), st)
}

func (s *taskStore) saveStored(ctx context.Context, st StoredTask) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.shared.SaveTask(ctx, st); err != nil {
		s.log.Warn().Err(err).Str("task_id", st.ID).Msg("a2a task not stored; tasks/get and tasks/cancel find it on this replica only")
	}
}

// markDirty schedules e for the next periodic save. Caller holds taskStore.mu.
func (s *taskStore) markDirty(e *taskEntry) {
	if s.shared != nil {
		s.dirty[e.id] = e
		s.poke()
	}
}

// anyRunning reports whether a task not in a terminal state is held here (its cancel is
// polled). Caller holds taskStore.mu.
func (s *taskStore) anyRunning() bool {
	for _, e := range s.byID {
		if !e.status.State.Terminal() {
			return true
		}
	}
	return false
}

// poke wakes the sync loop if it sleeps idle.
func (s *taskStore) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// cancelLocal cancels a task running here whose cancel was requested on another replica.
func (s *taskStore) cancelLocal(id string) {
	s.mu.Lock()
	e, ok := s.byID[id]
	if !ok || e.status.State.Terminal() {
		s.mu.Unlock()
		return
	}
	now := s.now()
	e.status = a2atypes.TaskStatus{State: a2atypes.TaskStateCanceled, Timestamp: &now}
	if e.cancel != nil {
		e.cancel()
	}
	s.mu.Unlock()
	s.save(e)
}

// getShared answers tasks/get for a task this replica does not hold.
func (s *taskStore) getShared(agentID string, caller Owner, id string, historyLength *int) (*a2atypes.Task, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, found, err := s.shared.LoadTask(ctx, id)
	if err != nil {
		s.log.Warn().Err(err).Str("task_id", id).Msg("tasks/get: shared task table unreadable")
		return nil, false
	}
	if !found || !st.accessible(agentID, caller) {
		return nil, false
	}
	var t a2atypes.Task
	if json.Unmarshal(st.Task, &t) != nil {
		return nil, false
	}
	if historyLength != nil && *historyLength < len(t.History) {
		t.History = t.History[len(t.History)-*historyLength:]
	}
	return &t, true
}

// accessible reports whether st is agentID's task and caller may access it.
func (st StoredTask) accessible(agentID string, caller Owner) bool {
	return st.AgentID == agentID && caller.mayAccess(Owner{Key: st.OwnerKey, Team: st.OwnerTeam})
}

// cancelShared answers tasks/cancel for a task this replica does not hold. The row is read
// first so that a task caller may not access is not found (its creator never changes, so the
// read cannot go stale before the cancel).
func (s *taskStore) cancelShared(agentID string, caller Owner, id string) (*a2atypes.Task, *Error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !caller.Admin {
		st, found, err := s.shared.LoadTask(ctx, id)
		if err != nil {
			return nil, internalError(err)
		}
		if !found || !st.accessible(agentID, caller) {
			return nil, taskNotFound(id)
		}
	}
	now := s.now()
	status, _ := json.Marshal(a2atypes.TaskStatus{State: a2atypes.TaskStateCanceled, Timestamp: &now})
	st, found, canceled, err := s.shared.CancelTask(ctx, agentID, id, status)
	if err != nil {
		return nil, internalError(err)
	}
	if !found {
		return nil, taskNotFound(id)
	}
	if !canceled {
		return nil, notCancelable(id, st.State)
	}
	var t a2atypes.Task
	if err := json.Unmarshal(st.Task, &t); err != nil {
		return nil, internalError(err)
	}
	return &t, nil
}
