package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
)

// ListTasks page sizes (a2a.proto ListTasksRequest.page_size: 1 to 100, at most 50 when
// unspecified).
const (
	DefaultListPageSize = 50
	MaxListPageSize     = 100
)

// TaskQuery is one ListTasks page request over agentID's tasks that Caller may access
// (Owner.mayAccess: the creating key, a key of its team, or the master key for all).
type TaskQuery struct {
	AgentID string
	Caller  Owner
	// ContextID and State ("" for any; State in 0.3 form, e.g. "working") filter the tasks.
	ContextID string
	State     string
	// StatusAfter, when set, keeps tasks whose status timestamp is at or after it (a2a.proto
	// ListTasksRequest.status_timestamp_after: "greater than or equal to").
	StatusAfter *time.Time
	// Limit is the page size; After, when set, is the cursor: only tasks strictly before it
	// in the order (updated desc, id desc).
	Limit int
	After *TaskCursor
}

// TaskCursor is a position in the ListTasks order: a task's last update and its id.
type TaskCursor struct {
	Updated time.Time
	ID      string
}

// TaskPage is one ListTasks page: Tasks in order, each with Updated set; Total is how many
// tasks match the query's filters regardless of the cursor.
type TaskPage struct {
	Tasks []StoredTask
	Total int
}

// listParams is a validated A2A 1.0 ListTasksRequest.
type listParams struct {
	query            TaskQuery
	historyLength    *int
	includeArtifacts bool
}

// parseListParams validates ListTasks params: contextId (string), status (a TASK_STATE_* name;
// TASK_STATE_UNSPECIFIED is no filter), pageSize (integer 1..100; 0 or absent: 50), pageToken
// (a nextPageToken from an earlier page), historyLength (integer >= 0), statusTimestampAfter
// (RFC 3339), includeArtifacts (boolean, default false). tenant is ignored. Params may be absent.
// Every problem is -32602 naming the field.
func parseListParams(raw json.RawMessage) (*listParams, *Error) {
	params := map[string]json.RawMessage{}
	if raw != nil && jsonKind(raw) != kindNull {
		var perr *Error
		if params, perr = paramsObject(raw); perr != nil {
			return nil, perr
		}
	}
	c := checker{fields: params, prefix: "params."}
	out := &listParams{query: TaskQuery{Limit: DefaultListPageSize}}
	out.query.ContextID, _ = c.optionalString("contextId")
	status, _ := c.optionalString("status")
	token, _ := c.optionalString("pageToken")
	after, _ := c.optionalString("statusTimestampAfter")
	if len(c.problems) > 0 {
		return nil, invalidParams("%s", c.problems[0])
	}
	if status != "" && status != "TASK_STATE_UNSPECIFIED" {
		s, ok := state03(status)
		if !ok {
			return nil, invalidParams("params.status must be a TASK_STATE_* task state, not %q", status)
		}
		out.query.State = string(s)
	}
	intField := func(name string, lo, hi int) (*int, *Error) {
		v, ok := c.present(name)
		if !ok {
			return nil, nil
		}
		var n int
		if jsonKind(v) != kindNumber || json.Unmarshal(v, &n) != nil || n < lo || n > hi {
			return nil, invalidParams("params.%s must be an integer from %d to %d", name, lo, hi)
		}
		return &n, nil
	}
	size, perr := intField("pageSize", 0, MaxListPageSize)
	if perr != nil {
		return nil, perr
	}
	if size != nil && *size > 0 {
		out.query.Limit = *size
	}
	if out.historyLength, perr = intField("historyLength", 0, 1<<30); perr != nil {
		return nil, perr
	}
	if v, ok := c.present("includeArtifacts"); ok {
		if jsonKind(v) != kindBool || json.Unmarshal(v, &out.includeArtifacts) != nil {
			return nil, invalidParams("params.includeArtifacts must be a boolean")
		}
	}
	if after != "" {
		t, err := time.Parse(time.RFC3339Nano, after)
		if err != nil {
			return nil, invalidParams("params.statusTimestampAfter must be an RFC 3339 timestamp")
		}
		out.query.StatusAfter = &t
	}
	if token != "" {
		cur, ok := decodeCursor(token)
		if !ok {
			return nil, invalidParams("params.pageToken is not a page token this server issued")
		}
		out.query.After = &cur
	}
	return out, nil
}

// encodeCursor makes the opaque nextPageToken: base64url("<unix nanoseconds>:<task id>").
func encodeCursor(c TaskCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Updated.UnixNano(), 10) + ":" + c.ID))
}

func decodeCursor(s string) (TaskCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return TaskCursor{}, false
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return TaskCursor{}, false
	}
	return TaskCursor{Updated: time.Unix(0, n), ID: id}, true
}

// list implements ListTasks (A2A 1.0 spec §3.1.4): the tasks of agentID that caller may
// access (others' tasks are never listed; API.md: tasks answer only their creator's key or
// team; the spec: "MUST return only tasks visible to the authenticated client"), most recently
// updated first and cursor-paginated (both MUSTs of §3.1.4); nextPageToken is always present,
// "" on the last page. With a shared table (every replica's
// tasks) the page is read from it; otherwise from this process's tasks. Artifacts are left
// out unless includeArtifacts; history is trimmed to historyLength when given.
func (s *taskStore) list(ctx context.Context, agentID string, caller Owner, p *listParams) (*listTasksResponse10, error) {
	q := p.query
	q.AgentID, q.Caller = agentID, caller
	limit := q.Limit
	q.Limit = limit + 1 // one more than the page tells whether another page exists
	var page TaskPage
	if s.shared != nil {
		var err error
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		page, err = s.shared.ListTasks(cctx, q)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
	} else {
		page = s.listLocal(q)
	}
	out := &listTasksResponse10{Tasks: []task10{}, PageSize: limit, TotalSize: page.Total}
	if len(page.Tasks) > limit {
		page.Tasks = page.Tasks[:limit]
		last := page.Tasks[limit-1]
		out.NextPageToken = encodeCursor(TaskCursor{Updated: last.Updated, ID: last.ID})
	}
	for _, st := range page.Tasks {
		var t a2atypes.Task
		if json.Unmarshal(st.Task, &t) != nil {
			continue
		}
		if p.historyLength != nil && *p.historyLength < len(t.History) {
			t.History = t.History[len(t.History)-*p.historyLength:]
		}
		if !p.includeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, *task10Of(&t))
	}
	return out, nil
}

// listLocal answers a TaskQuery from this process's tasks; a task's last update is its status
// timestamp.
func (s *taskStore) listLocal(q TaskQuery) TaskPage {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var all []StoredTask
	for _, e := range s.byID {
		if e.agentID != q.AgentID || !q.Caller.mayAccess(e.owner) || s.expired(e, now) {
			continue
		}
		if q.ContextID != "" && e.contextID != q.ContextID {
			continue
		}
		if q.State != "" && string(e.status.State) != q.State {
			continue
		}
		updated := e.created
		if e.status.Timestamp != nil {
			updated = *e.status.Timestamp
		}
		if q.StatusAfter != nil && updated.Before(*q.StatusAfter) {
			continue
		}
		st := e.stored()
		st.Updated = updated
		all = append(all, st)
	}
	slices.SortFunc(all, func(a, b StoredTask) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	page := TaskPage{Total: len(all)}
	for _, st := range all {
		if q.After != nil && !before(st, *q.After) {
			continue
		}
		if len(page.Tasks) == q.Limit {
			break
		}
		page.Tasks = append(page.Tasks, st)
	}
	return page
}

// before reports whether st comes after cursor c in the order (updated desc, id desc).
func before(st StoredTask, c TaskCursor) bool {
	if !st.Updated.Equal(c.Updated) {
		return st.Updated.Before(c.Updated)
	}
	return st.ID < c.ID
}
