package a2a

import (
	"context"
	"errors"

	"lockstep/pkg/store"
)

// PGTasks is SharedTasks over gateway.a2a_tasks (pkg/store), the tasks of replica; nil when
// st is nil (no database: tasks stay in this process).
func PGTasks(st *store.Store, replica string) SharedTasks {
	if st == nil {
		return nil
	}
	return sharedTasks{st: st, replica: replica}
}

// sharedTasks is SharedTasks over gateway.a2a_tasks (pkg/store).
type sharedTasks struct {
	st      *store.Store
	replica string
}

var _ SharedTasks = sharedTasks{}

func (t sharedTasks) SaveTask(ctx context.Context, x StoredTask) error {
	return t.st.SaveTask(ctx, store.TaskRow{ID: x.ID, AgentID: x.AgentID, ReplicaID: t.replica, State: x.State,
		OwnerToken: x.OwnerKey, OwnerTeam: x.OwnerTeam, Task: x.Task})
}

func (t sharedTasks) LoadTask(ctx context.Context, id string) (StoredTask, bool, error) {
	r, err := t.st.LoadTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return StoredTask{}, false, nil
	}
	if err != nil {
		return StoredTask{}, false, err
	}
	return storedTask(r), true, nil
}

func storedTask(r store.TaskRow) StoredTask {
	return StoredTask{ID: r.ID, AgentID: r.AgentID, State: r.State, OwnerKey: r.OwnerToken, OwnerTeam: r.OwnerTeam, Task: r.Task}
}

func (t sharedTasks) CancelTask(ctx context.Context, agentID, id string, status []byte) (StoredTask, bool, bool, error) {
	r, canceled, err := t.st.CancelTask(ctx, agentID, id, status)
	if errors.Is(err, store.ErrNotFound) {
		return StoredTask{}, false, false, nil
	}
	if err != nil {
		return StoredTask{}, false, false, err
	}
	return storedTask(r), true, canceled, nil
}

func (t sharedTasks) CancelRequested(ctx context.Context, ids []string) ([]string, error) {
	return t.st.CancelRequested(ctx, ids)
}

func (t sharedTasks) PruneTasks(ctx context.Context) error {
	_, err := t.st.PruneTasks(ctx, StoredTaskTTL, MaxStoredTasks)
	return err
}

func (t sharedTasks) ListTasks(ctx context.Context, q TaskQuery) (TaskPage, error) {
	sq := store.TaskListQuery{AgentID: q.AgentID, Admin: q.Caller.Admin, OwnerToken: q.Caller.Key,
		OwnerTeam: q.Caller.Team, ContextID: q.ContextID, State: q.State, StatusAfter: q.StatusAfter, Limit: q.Limit}
	if q.After != nil {
		sq.AfterUpdated, sq.AfterID = &q.After.Updated, q.After.ID
	}
	rows, updated, total, err := t.st.ListTasks(ctx, sq)
	if err != nil {
		return TaskPage{}, err
	}
	page := TaskPage{Total: total}
	for i, r := range rows {
		st := storedTask(r)
		st.Updated = updated[i]
		page.Tasks = append(page.Tasks, st)
	}
	return page, nil
}
