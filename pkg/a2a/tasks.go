package a2a

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// Task retention defaults: tasks created by message/stream are kept in this process's memory
// only, for tasks/get and tasks/cancel.
const (
	// DefaultMaxTasks is how many tasks are kept; the oldest is dropped first.
	DefaultMaxTasks = 1000
	// DefaultTaskTTL is how long a task is kept after its creation.
	DefaultTaskTTL = time.Hour
)

// artifactName is the name of the one artifact of a streamed task, as LiteLLM names it.
const artifactName = "response"

// taskStore holds the tasks created by message/stream (A2A spec §6.1), bounded by count and
// age, in this process; with shared set (Handler.ShareTasks) it also stores them where every
// replica finds them (shared.go).
type taskStore struct {
	max    int
	ttl    time.Duration
	now    func() time.Time
	shared SharedTasks // nil: tasks live in this process only
	log    zerolog.Logger

	mu    sync.Mutex
	byID  map[string]*taskEntry
	order *list.List            // of *taskEntry, oldest first
	dirty map[string]*taskEntry // changed since last stored (shared only)
	wake  chan struct{}         // cap 1: the sync loop should look again (poke)
}

// taskEntry is one task. Fields after mu's comment are guarded by taskStore.mu.
type taskEntry struct {
	id         string
	agentID    string
	owner      Owner // the caller of message/stream (Admin is not recorded)
	contextID  string
	artifactID string
	created    time.Time
	// cancel stops the stream's Completer call (tasks/cancel, A2A spec §7.4).
	cancel context.CancelFunc

	// guarded by taskStore.mu
	elem    *list.Element
	history []*a2atypes.Message
	status  a2atypes.TaskStatus
	text    strings.Builder
	chunks  int
}

func newTaskStore(max int, ttl time.Duration) *taskStore {
	return &taskStore{
		max:   max,
		ttl:   ttl,
		now:   time.Now,
		byID:  make(map[string]*taskEntry),
		order: list.New(),
		dirty: make(map[string]*taskEntry),
		wake:  make(chan struct{}, 1),
	}
}

// create registers a new task in state "submitted" for msg, in msg's context (or a new one),
// and returns it with its first snapshot. msg is stored as the first history entry with the
// new task's id and context id filled in (a2a-go's NewSubmittedTask does the same); a taskId
// the client put on msg is not honoured: every message/stream starts a new task.
func (s *taskStore) create(agentID string, owner Owner, msg *a2atypes.Message, cancel context.CancelFunc) (*taskEntry, *a2atypes.Task) {
	now := s.now()
	contextID := msg.ContextID
	if contextID == "" {
		contextID = uuid.NewString()
	}
	stored := *msg
	e := &taskEntry{
		id:         uuid.NewString(),
		agentID:    agentID,
		owner:      Owner{Key: owner.Key, Team: owner.Team},
		contextID:  contextID,
		artifactID: uuid.NewString(),
		created:    now,
		cancel:     cancel,
		status:     a2atypes.TaskStatus{State: a2atypes.TaskStateSubmitted, Timestamp: &now},
	}
	stored.TaskID = a2atypes.TaskID(e.id)
	stored.ContextID = contextID
	e.history = []*a2atypes.Message{&stored}

	s.mu.Lock()
	e.elem = s.order.PushBack(e)
	s.byID[e.id] = e
	s.poke()
	for s.order.Len() > 0 && (s.order.Len() > s.max || s.expired(s.order.Front().Value.(*taskEntry), now)) {
		s.remove(s.order.Front().Value.(*taskEntry))
	}
	snap := e.snapshot(nil)
	s.mu.Unlock()
	s.save(e)
	return e, snap
}

func (s *taskStore) expired(e *taskEntry, now time.Time) bool {
	return now.Sub(e.created) > s.ttl
}

func (s *taskStore) remove(e *taskEntry) {
	s.order.Remove(e.elem)
	delete(s.byID, e.id)
	delete(s.dirty, e.id)
}

// lookup returns agentID's task id; a task of another agent, or one caller may not access
// (Owner.mayAccess), is not found.
func (s *taskStore) lookup(agentID string, caller Owner, id string) (*taskEntry, bool) {
	e, ok := s.byID[id]
	if !ok || e.agentID != agentID || !caller.mayAccess(e.owner) {
		return nil, false
	}
	if s.expired(e, s.now()) {
		s.remove(e)
		return nil, false
	}
	return e, true
}

// get returns a snapshot of agentID's task id with at most historyLength history messages,
// when caller may access it. A task not held here is read from the shared table (when shared).
func (s *taskStore) get(agentID string, caller Owner, id string, historyLength *int) (*a2atypes.Task, bool) {
	s.mu.Lock()
	e, ok := s.lookup(agentID, caller, id)
	if ok {
		defer s.mu.Unlock()
		return e.snapshot(historyLength), true
	}
	s.mu.Unlock()
	if s.shared == nil {
		return nil, false
	}
	return s.getShared(agentID, caller, id, historyLength)
}

// setWorking moves a submitted task to "working"; it reports false when the task is already
// final (canceled before the stream got going).
func (s *taskStore) setWorking(e *taskEntry) (a2atypes.TaskStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.status.State.Terminal() {
		return e.status, false
	}
	now := s.now()
	e.status = a2atypes.TaskStatus{State: a2atypes.TaskStateWorking, Timestamp: &now}
	s.markDirty(e)
	return e.status, true
}

// appendText adds a streamed delta to the task's artifact; it reports false when the task is
// already final (canceled), so that the stream stops.
func (s *taskStore) appendText(e *taskEntry, delta string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.status.State.Terminal() {
		return false
	}
	e.text.WriteString(delta)
	e.chunks++
	s.markDirty(e)
	return true
}

// finish puts the task in the terminal state unless it already is in one (tasks/cancel won
// the race), and returns the status in effect.
func (s *taskStore) finish(e *taskEntry, state a2atypes.TaskState, msg *a2atypes.Message) a2atypes.TaskStatus {
	s.mu.Lock()
	if !e.status.State.Terminal() {
		now := s.now()
		e.status = a2atypes.TaskStatus{State: state, Message: msg, Timestamp: &now}
	}
	status := e.status
	s.mu.Unlock()
	s.save(e)
	return status
}

// cancel implements tasks/cancel (A2A spec §7.4): a working or submitted task becomes
// "canceled" and its stream is stopped; a task in a terminal state is not cancelable
// (-32002, §8.2); an unknown one, or one caller may not access, is -32001.
// A task not held here is canceled in the shared table (when shared); the replica running it
// stops its stream when it next polls (shared.go).
func (s *taskStore) cancel(agentID string, caller Owner, id string) (*a2atypes.Task, *Error) {
	s.mu.Lock()
	e, ok := s.lookup(agentID, caller, id)
	if !ok {
		s.mu.Unlock()
		if s.shared != nil {
			return s.cancelShared(agentID, caller, id)
		}
		return nil, taskNotFound(id)
	}
	if e.status.State.Terminal() {
		s.mu.Unlock()
		return nil, notCancelable(id, string(e.status.State))
	}
	now := s.now()
	e.status = a2atypes.TaskStatus{State: a2atypes.TaskStateCanceled, Timestamp: &now}
	if e.cancel != nil {
		e.cancel()
	}
	snap := e.snapshot(nil)
	s.mu.Unlock()
	s.save(e)
	return snap, nil
}

// notCancelable is the A2A error for a task in a terminal state (-32002, §8.2).
func notCancelable(id, state string) *Error {
	return &Error{
		Code:    CodeTaskNotCancelable,
		Message: "Task cannot be canceled",
		Data:    map[string]any{"taskId": id, "state": state},
	}
}

func taskNotFound(id string) *Error {
	return &Error{Code: CodeTaskNotFound, Message: "Task not found", Data: map[string]any{"taskId": id}}
}

// snapshot copies the task as the Task object (A2A spec §6.1) with the artifact text so far as
// one text part. Callers hold taskStore.mu.
func (e *taskEntry) snapshot(historyLength *int) *a2atypes.Task {
	t := &a2atypes.Task{
		ID:        a2atypes.TaskID(e.id),
		ContextID: e.contextID,
		Status:    e.status,
	}
	history := e.history
	if historyLength != nil && *historyLength < len(history) {
		history = history[len(history)-*historyLength:]
	}
	if len(history) > 0 {
		t.History = append([]*a2atypes.Message(nil), history...)
	}
	if e.chunks > 0 || e.status.State == a2atypes.TaskStateCompleted {
		t.Artifacts = []*a2atypes.Artifact{{
			ID:    a2atypes.ArtifactID(e.artifactID),
			Name:  artifactName,
			Parts: a2atypes.ContentParts{a2atypes.TextPart{Text: e.text.String()}},
		}}
	}
	return t
}
