package a2a

import (
	"strings"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
)

// A2A 1.0 wire shapes (A2A 1.0 spec §4 data model, normatively specification/a2a.proto, serialized as the JSON-RPC
// binding does: the ProtoJSON mapping of specification/a2a.proto, camelCase fields, enums as
// their names, oneofs as the member's field name, no "kind" discriminators). The handler keeps
// tasks in the 0.3 model (a2a-go's types, the shared gateway.a2a_tasks rows) and converts at
// the edge, so both versions see the same tasks.

// part10 is a Part (a2a.proto Part, the "unified parts"): exactly one of text, raw (base64), url or data,
// with optional metadata, filename and mediaType.
type part10 struct {
	Text      *string        `json:"text,omitempty"`
	Raw       string         `json:"raw,omitempty"`
	URL       string         `json:"url,omitempty"`
	Data      any            `json:"data,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Filename  string         `json:"filename,omitempty"`
	MediaType string         `json:"mediaType,omitempty"`
}

// message10 is a Message (§4.1.4); role is "ROLE_USER" or "ROLE_AGENT".
type message10 struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             string         `json:"role"`
	Parts            []part10       `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// status10 is a TaskStatus (a2a.proto TaskStatus); state is "TASK_STATE_*"; timestamp RFC 3339 UTC.
type status10 struct {
	State     string     `json:"state"`
	Message   *message10 `json:"message,omitempty"`
	Timestamp string     `json:"timestamp,omitempty"`
}

// artifact10 is an Artifact (a2a.proto Artifact).
type artifact10 struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []part10       `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// task10 is a Task (§4.1.1).
type task10 struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    status10       `json:"status"`
	Artifacts []artifact10   `json:"artifacts,omitempty"`
	History   []message10    `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// statusUpdate10 is a TaskStatusUpdateEvent (§4.2.1): 1.0 has no "final" flag; the stream
// ends after the terminal status.
type statusUpdate10 struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    status10       `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// artifactUpdate10 is a TaskArtifactUpdateEvent (§4.2.2).
type artifactUpdate10 struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  artifact10     `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// streamResponse10 is a StreamResponse (§3.2.3): one of task, message, statusUpdate,
// artifactUpdate. SendMessage answers the first two (SendMessageResponse, the same oneof).
type streamResponse10 struct {
	Task           *task10           `json:"task,omitempty"`
	Message        *message10        `json:"message,omitempty"`
	StatusUpdate   *statusUpdate10   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *artifactUpdate10 `json:"artifactUpdate,omitempty"`
}

// listTasksResponse10 is a ListTasksResponse (§3.1.4). nextPageToken is "" on the last page.
type listTasksResponse10 struct {
	Tasks         []task10 `json:"tasks"`
	NextPageToken string   `json:"nextPageToken"`
	PageSize      int      `json:"pageSize"`
	TotalSize     int      `json:"totalSize"`
}

// state10 maps a 0.3 task state ("input-required") to its 1.0 enum name
// ("TASK_STATE_INPUT_REQUIRED"); "unknown" and "" are TASK_STATE_UNSPECIFIED.
func state10(s a2atypes.TaskState) string {
	if s == a2atypes.TaskStateUnknown || s == a2atypes.TaskStateUnspecified {
		return "TASK_STATE_UNSPECIFIED"
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
}

// state03 maps a 1.0 enum name to the 0.3 state; ok=false for a name that is not a task state.
func state03(s string) (a2atypes.TaskState, bool) {
	switch s {
	case "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
		"TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED":
		return a2atypes.TaskState(strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, "TASK_STATE_")), "_", "-")), true
	}
	return "", false
}

func role10(r a2atypes.MessageRole) string {
	if r == a2atypes.MessageRoleAgent {
		return "ROLE_AGENT"
	}
	return "ROLE_USER"
}

func parts10(ps a2atypes.ContentParts) []part10 {
	out := make([]part10, 0, len(ps))
	for _, p := range ps {
		switch p := p.(type) {
		case a2atypes.TextPart:
			out = append(out, part10{Text: &p.Text, Metadata: p.Metadata})
		case a2atypes.DataPart:
			out = append(out, part10{Data: p.Data, Metadata: p.Metadata})
		case a2atypes.FilePart:
			switch f := p.File.(type) {
			case a2atypes.FileBytes:
				out = append(out, part10{Raw: f.Bytes, Filename: f.Name, MediaType: f.MimeType, Metadata: p.Metadata})
			case a2atypes.FileURI:
				out = append(out, part10{URL: f.URI, Filename: f.Name, MediaType: f.MimeType, Metadata: p.Metadata})
			}
		}
	}
	return out
}

func message10Of(m *a2atypes.Message) *message10 {
	if m == nil {
		return nil
	}
	refs := make([]string, 0, len(m.ReferenceTasks))
	for _, r := range m.ReferenceTasks {
		refs = append(refs, string(r))
	}
	if len(refs) == 0 {
		refs = nil
	}
	return &message10{
		MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID), Role: role10(m.Role),
		Parts: parts10(m.Parts), Metadata: m.Metadata, Extensions: m.Extensions, ReferenceTaskIDs: refs,
	}
}

func status10Of(s a2atypes.TaskStatus) status10 {
	out := status10{State: state10(s.State), Message: message10Of(s.Message)}
	if s.Timestamp != nil {
		out.Timestamp = s.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func artifact10Of(a *a2atypes.Artifact) artifact10 {
	return artifact10{
		ArtifactID: string(a.ID), Name: a.Name, Description: a.Description, Parts: parts10(a.Parts),
		Metadata: a.Metadata, Extensions: a.Extensions,
	}
}

func task10Of(t *a2atypes.Task) *task10 {
	out := &task10{ID: string(t.ID), ContextID: t.ContextID, Status: status10Of(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		if a != nil {
			out.Artifacts = append(out.Artifacts, artifact10Of(a))
		}
	}
	for _, m := range t.History {
		if m != nil {
			out.History = append(out.History, *message10Of(m))
		}
	}
	return out
}

// result10 converts a 0.3 result (as the 0.3 methods produce it) to its 1.0 shape: a Message
// or Task becomes the SendMessageResponse / StreamResponse member; status and artifact
// updates their StreamResponse members. Any other value is returned unchanged.
func result10(v any) any {
	switch v := v.(type) {
	case *a2atypes.Message:
		return &streamResponse10{Message: message10Of(v)}
	case *a2atypes.Task:
		return &streamResponse10{Task: task10Of(v)}
	case *a2atypes.TaskStatusUpdateEvent:
		return &streamResponse10{StatusUpdate: &statusUpdate10{
			TaskID: string(v.TaskID), ContextID: v.ContextID, Status: status10Of(v.Status), Metadata: v.Metadata}}
	case *a2atypes.TaskArtifactUpdateEvent:
		ev := &artifactUpdate10{TaskID: string(v.TaskID), ContextID: v.ContextID, Append: v.Append,
			LastChunk: v.LastChunk, Metadata: v.Metadata}
		if v.Artifact != nil {
			ev.Artifact = artifact10Of(v.Artifact)
		}
		return &streamResponse10{ArtifactUpdate: ev}
	}
	return v
}

// result converts a 0.3 result to the wire version w.
func (w wire) result(v any) any {
	if w == wire10 {
		return result10(v)
	}
	return v
}

// taskResult is what GetTask/CancelTask answer in w: 0.3 the Task itself, 1.0 the bare Task
// too (those methods return a Task, not a StreamResponse).
func (w wire) taskResult(t *a2atypes.Task) any {
	if w == wire10 {
		return task10Of(t)
	}
	return t
}
