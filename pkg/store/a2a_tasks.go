package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TaskRow is one gateway.a2a_tasks row (sql/004_freshness.sql, sql/007_a2a_task_owner.sql):
// an A2A task as its replica last stored it. Task is the A2A Task object as JSON; OwnerToken
// and OwnerTeam are its creator's key hash and team ("" for none), written once at creation.
type TaskRow struct {
	ID         string
	AgentID    string
	ReplicaID  string
	State      string
	OwnerToken string
	OwnerTeam  string
	Task       []byte
}

// SaveTask upserts a task. A row whose cancel was requested (by tasks/cancel on any replica)
// keeps its canceled state: only a canceled snapshot replaces it. The owner is written by the
// insert only, never changed by an update.
func (s *Store) SaveTask(ctx context.Context, t TaskRow) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO gateway.a2a_tasks AS t (task_id, agent_id, replica_id, state, task, owner_token, owner_team)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)
		ON CONFLICT (task_id) DO UPDATE SET state = EXCLUDED.state, task = EXCLUDED.task, updated_at = now()
		WHERE NOT t.cancel_requested OR EXCLUDED.state = 'canceled'`,
		t.ID, t.AgentID, t.ReplicaID, t.State, string(t.Task), t.OwnerToken, t.OwnerTeam)
	if err != nil {
		return fmt.Errorf("save a2a task %q: %w", t.ID, mapErr(err))
	}
	return nil
}

// LoadTask reads a task. Errors: ErrNotFound, ErrUnavailable.
func (s *Store) LoadTask(ctx context.Context, id string) (TaskRow, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var t TaskRow
	var task string
	err := s.pool.QueryRow(ctx, `SELECT task_id, agent_id, replica_id, state, owner_token, owner_team, task::text
		FROM gateway.a2a_tasks WHERE task_id = $1`, id).
		Scan(&t.ID, &t.AgentID, &t.ReplicaID, &t.State, &t.OwnerToken, &t.OwnerTeam, &task)
	if err != nil {
		return t, fmt.Errorf("load a2a task %q: %w", id, mapErr(err))
	}
	t.Task = []byte(task)
	return t, nil
}

// CancelTask marks agentID's task id canceled (cancel_requested, state 'canceled', the Task's
// status replaced by status JSON) when it is still submitted or working, and returns the row
// and true. A task in a terminal state is returned unchanged with false. Errors: ErrNotFound
// (no such task of that agent), ErrUnavailable.
func (s *Store) CancelTask(ctx context.Context, agentID, id string, status []byte) (TaskRow, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var t TaskRow
	var task string
	err := s.pool.QueryRow(ctx, `UPDATE gateway.a2a_tasks SET cancel_requested = true, state = 'canceled',
			task = jsonb_set(task, '{status}', $3::jsonb), updated_at = now()
		WHERE task_id = $1 AND agent_id = $2 AND state IN ('submitted', 'working')
		RETURNING task_id, agent_id, replica_id, state, owner_token, owner_team, task::text`, id, agentID, string(status)).
		Scan(&t.ID, &t.AgentID, &t.ReplicaID, &t.State, &t.OwnerToken, &t.OwnerTeam, &task)
	if err == nil {
		t.Task = []byte(task)
		return t, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return t, false, fmt.Errorf("cancel a2a task %q: %w", id, mapErr(err))
	}
	t, err = s.LoadTask(ctx, id)
	if err != nil || t.AgentID != agentID {
		return TaskRow{}, false, fmt.Errorf("cancel a2a task %q: %w", id, ErrNotFound)
	}
	return t, false, nil
}

// CancelRequested returns which of ids had tasks/cancel requested (the running replica polls
// its running tasks with it).
func (s *Store) CancelRequested(ctx context.Context, ids []string) ([]string, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT task_id FROM gateway.a2a_tasks WHERE task_id = ANY($1) AND cancel_requested`, ids)
	if err != nil {
		return nil, fmt.Errorf("poll a2a cancels: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("poll a2a cancels: %w", mapErr(err))
	}
	return out, nil
}

// PruneTasks deletes tasks created more than maxAge ago, then all but the maxRows newest.
func (s *Store) PruneTasks(ctx context.Context, maxAge time.Duration, maxRows int) (int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	a, err := s.pool.Exec(ctx, `DELETE FROM gateway.a2a_tasks WHERE created_at < now() - $1::interval`,
		fmt.Sprintf("%d seconds", int64(maxAge.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("prune a2a tasks: %w", mapErr(err))
	}
	b, err := s.pool.Exec(ctx, `DELETE FROM gateway.a2a_tasks WHERE task_id IN (
		SELECT task_id FROM gateway.a2a_tasks ORDER BY created_at DESC OFFSET $1)`, maxRows)
	if err != nil {
		return 0, fmt.Errorf("prune a2a tasks: %w", mapErr(err))
	}
	return a.RowsAffected() + b.RowsAffected(), nil
}

// TaskListQuery selects ListTasks rows (A2A 1.0 ListTasks): agentID's tasks the caller may
// see — all when Admin, else those whose owner_token is OwnerToken or, with a non-empty
// OwnerTeam, whose owner_team is OwnerTeam — optionally of one context (task->>'contextId'),
// one state, with a status timestamp at or after StatusAfter, and (the cursor) strictly before
// (AfterUpdated, AfterID) in the order updated_at DESC, task_id DESC.
type TaskListQuery struct {
	AgentID               string
	Admin                 bool
	OwnerToken, OwnerTeam string
	ContextID, State      string
	StatusAfter           *time.Time
	AfterUpdated          *time.Time
	AfterID               string
	Limit                 int
}

// ListTasks returns up to q.Limit rows of q in order, each with its updated_at, and how many
// rows match q's filters ignoring the cursor and the limit. Errors: ErrUnavailable.
func (s *Store) ListTasks(ctx context.Context, q TaskListQuery) ([]TaskRow, []time.Time, int, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `WITH m AS (
			SELECT task_id, agent_id, replica_id, state, owner_token, owner_team, task, updated_at
			FROM gateway.a2a_tasks
			WHERE agent_id = $1
			  AND ($2 OR owner_token = $3 OR ($4 <> '' AND owner_team = $4))
			  AND ($5 = '' OR task->>'contextId' = $5)
			  AND ($6 = '' OR state = $6)
			  AND ($7::timestamptz IS NULL OR (task->'status'->>'timestamp')::timestamptz >= $7))
		SELECT task_id, agent_id, replica_id, state, owner_token, owner_team, task::text, updated_at,
			(SELECT count(*) FROM m)
		FROM m
		WHERE $8::timestamptz IS NULL OR (updated_at, task_id) < ($8, $9)
		ORDER BY updated_at DESC, task_id DESC
		LIMIT $10`,
		q.AgentID, q.Admin, q.OwnerToken, q.OwnerTeam, q.ContextID, q.State, q.StatusAfter,
		q.AfterUpdated, q.AfterID, q.Limit)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("list a2a tasks: %w", mapErr(err))
	}
	defer rows.Close()
	var out []TaskRow
	var updated []time.Time
	total := 0
	for rows.Next() {
		var t TaskRow
		var task string
		var u time.Time
		var n int64
		if err := rows.Scan(&t.ID, &t.AgentID, &t.ReplicaID, &t.State, &t.OwnerToken, &t.OwnerTeam, &task, &u, &n); err != nil {
			return nil, nil, 0, fmt.Errorf("list a2a tasks: %w", mapErr(err))
		}
		t.Task = []byte(task)
		out = append(out, t)
		updated = append(updated, u)
		total = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("list a2a tasks: %w", mapErr(err))
	}
	if len(out) == 0 && q.AfterUpdated == nil {
		return out, updated, 0, nil
	}
	if len(out) == 0 { // past the last page: count the matches on their own
		var n int64
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM gateway.a2a_tasks
			WHERE agent_id = $1
			  AND ($2 OR owner_token = $3 OR ($4 <> '' AND owner_team = $4))
			  AND ($5 = '' OR task->>'contextId' = $5)
			  AND ($6 = '' OR state = $6)
			  AND ($7::timestamptz IS NULL OR (task->'status'->>'timestamp')::timestamptz >= $7)`,
			q.AgentID, q.Admin, q.OwnerToken, q.OwnerTeam, q.ContextID, q.State, q.StatusAfter).Scan(&n)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("list a2a tasks: %w", mapErr(err))
		}
		total = int(n)
	}
	return out, updated, total, nil
}
