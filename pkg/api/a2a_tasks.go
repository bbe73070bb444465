package api

import (
	"context"
	"errors"

	"lockstep/pkg/a2a"
	"lockstep/pkg/store"
)

// sharedTasks is a2a.SharedTasks over gateway.a2a_tasks (pkg/store).
type sharedTasks struct {
	st      *store.Store
	replica string
}

var _ a2a.SharedTasks = sharedTasks{}

func (t sharedTasks) SaveTask(ctx context.Context, x a2a.StoredTask) error {
	return t.st.SaveTask(ctx, store.TaskRow{ID: x.ID, AgentID: x.AgentID, ReplicaID: t.replica, State: x.State,
		OwnerToken: x.OwnerKey, OwnerTeam: x.OwnerTeam, Task: x.Task})
}

func (t sharedTasks) LoadTask(ctx context.Context, id string) (a2a.StoredTask, bool, error) {
	r, err := t.st.LoadTask(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return a2a.StoredTask{}, false, nil
	}
	if err != nil {
		return a2a.StoredTask{}, false, err
	}
	return storedTask(r), true, nil
}

func storedTask(r store.TaskRow) a2a.StoredTask {
	return a2a.StoredTask{ID: r.ID, AgentID: r.AgentID, State: r.State, OwnerKey: r.OwnerToken, OwnerTeam: r.OwnerTeam, Task: r.Task}
}

func (t sharedTasks) CancelTask(ctx context.Context, agentID, id string, status []byte) (a2a.StoredTask, bool, bool, error) {
	r, canceled, err := t.st.CancelTask(ctx, agentID, id, status)
	if errors.Is(err, store.ErrNotFound) {
		return a2a.StoredTask{}, false, false, nil
	}
	if err != nil {
		return a2a.StoredTask{}, false, false, err
	}
	return storedTask(r), true, canceled, nil
}

func (t sharedTasks) CancelRequested(ctx context.Context, ids []string) ([]string, error) {
	return t.st.CancelRequested(ctx, ids)
}

func (t sharedTasks) PruneTasks(ctx context.Context) error {
	_, err := t.st.PruneTasks(ctx, a2a.StoredTaskTTL, a2a.MaxStoredTasks)
	return err
}

func (t sharedTasks) ListTasks(ctx context.Context, q a2a.TaskQuery) (a2a.TaskPage, error) {
	sq := store.TaskListQuery{AgentID: q.AgentID, Admin: q.Caller.Admin, OwnerToken: q.Caller.Key,
		OwnerTeam: q.Caller.Team, ContextID: q.ContextID, State: q.State, StatusAfter: q.StatusAfter, Limit: q.Limit}
	if q.After != nil {
		sq.AfterUpdated, sq.AfterID = &q.After.Updated, q.After.ID
	}
	rows, updated, total, err := t.st.ListTasks(ctx, sq)
	if err != nil {
		return a2a.TaskPage{}, err
	}
	page := a2a.TaskPage{Total: total}
	for i, r := range rows {
		st := storedTask(r)
		st.Updated = updated[i]
		page.Tasks = append(page.Tasks, st)
	}
	return page, nil
}
