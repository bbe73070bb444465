package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// MaxBodyBytes is the largest JSON-RPC request body RPC reads (10 MiB); a larger one is
// answered with HTTP 413 and -32600.
const MaxBodyBytes = 10 << 20

// Resolver finds an agent by agent_id or agent_name. It returns [ErrAgentNotFound] when none
// matches (after the caller's read-through, which spends the agents budget); any other error
// is an internal failure.
type Resolver interface {
	ResolveAgent(ctx context.Context, idOrName string) (*Agent, error)
}

// Completer runs an agent's model through the gateway (router, agent guardrails, logging);
// the gateway implements it. text is the user message's text parts joined with "\n".
//
// Errors are shown to the A2A caller: as the JSON-RPC error of message/send, or in the
// "failed" status message of message/stream. They must not carry secrets. An error that is
// (or wraps) an *[Error] is passed through with its code; any other becomes -32603
// "Internal error: <err>".
//
// c is the RPC request's Call, as the HTTP layer gave it to [Handler.RPC]: the caller and the
// headers travel as this parameter, never as context values.
type Completer interface {
	// Complete returns the model's whole reply.
	Complete(ctx context.Context, c Call, agent *Agent, text string) (string, error)
	// Stream calls onDelta with each piece of the reply as it arrives, sequentially, never
	// concurrently, and returns when the reply is complete. When onDelta returns an error
	// (the client went away, the task was canceled) Stream stops and returns an error. ctx is
	// canceled when the client disconnects or tasks/cancel cancels the task.
	Stream(ctx context.Context, c Call, agent *Agent, text string, onDelta func(delta string) error) error
}

// Call is what the HTTP layer knows of one RPC request, handed as is to the [Completer] of
// message/send and message/stream (SendMessage, SendStreamingMessage). a2a does not look
// inside.
type Call struct {
	// Caller is the authenticated caller, in the gateway's own type.
	Caller any
	// Header is the request's header; RespHeader the response's (a Completer may set
	// headers on it before a message/send answer is written; a stream's header is sent with
	// its first event, before the Completer runs).
	Header, RespHeader http.Header
}

// Handler serves the A2A endpoints of the gateway's agents. Create it with [NewHandler]; it
// is safe for concurrent use. It keeps the tasks of message/stream in memory (the last
// [DefaultMaxTasks], for [DefaultTaskTTL]) for tasks/get and tasks/cancel.
type Handler struct {
	resolver  Resolver
	completer Completer
	log       zerolog.Logger
	tasks     *taskStore
}

// NewHandler returns a Handler resolving agents with r and running them with c. log gets
// component "a2a"; a logger in the request context (zerolog.Ctx) is preferred when present.
func NewHandler(r Resolver, c Completer, log zerolog.Logger) *Handler {
	return &Handler{
		resolver:  r,
		completer: c,
		log:       log.With().Str("component", "a2a").Logger(),
		tasks:     newTaskStore(DefaultMaxTasks, DefaultTaskTTL),
	}
}

func (h *Handler) logger(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &h.log
}

// Card serves GET /a2a/{idOrName}/.well-known/agent-card.json (and the older agent.json):
// the agent's AgentCard (A2A spec §5.3, §5.5) as registered, with
//   - url rewritten to baseURL + "/a2a/" + agent.ID (baseURL like "http://host:port", derived
//     by the caller from the request), so that clients call the gateway, never the agent's
//     original endpoint;
//   - preferredTransport "JSONRPC" and additionalInterfaces [{url, "JSONRPC"}]: the only
//     transport the gateway serves at that url (§5.5 requires the preferred transport to be
//     available at url; interfaces of the original agent are not reachable through the gateway);
//   - protocolVersion "0.3.0" when the registered card has none;
//   - supportedInterfaces (A2A 1.0 AgentCard) [{url, protocolBinding "JSONRPC", protocolVersion
//     "1.0"}, {url, "JSONRPC", "0.3"}]: both versions served at url, chosen per request by the
//     A2A-Version header (version.go). 1.0 clients (the A2A JS SDK 1.x) pick the 1.0 interface;
//     0.3 clients read url and preferredTransport, which stay as above.
//
// Every other field (capabilities included: a2a-go's client streams only when
// capabilities.streaming is true) is served as registered.
//
// Unknown agent: 404 {"detail": "Agent '<idOrName>' not found"} (LiteLLM's body). Lookup
// failure: 500 {"detail": "agent lookup failed"}.
func (h *Handler) Card(w http.ResponseWriter, r *http.Request, idOrName, baseURL string) {
	ctx := r.Context()
	agent, err := h.resolver.ResolveAgent(ctx, idOrName)
	if errors.Is(err, ErrAgentNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": agentNotFoundMessage(idOrName)})
		return
	}
	if err != nil {
		h.logger(ctx).Error().Err(err).Str("agent", idOrName).Msg("resolve agent for card")
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "agent lookup failed"})
		return
	}
	card, err := servedCard(agent, baseURL)
	if err != nil {
		h.logger(ctx).Error().Err(err).Str("agent_id", agent.ID).Msg("build agent card")
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "agent card is invalid"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(card)
}

// AgentURL is the JSON-RPC endpoint of agent behind a gateway at baseURL: the url its served
// card advertises.
func AgentURL(baseURL string, agent *Agent) string {
	return strings.TrimRight(baseURL, "/") + "/a2a/" + url.PathEscape(agent.ID)
}

func servedCard(agent *Agent, baseURL string) ([]byte, error) {
	var fields map[string]any
	if err := json.Unmarshal(agent.Card, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("agent %q: card is not a JSON object: %v", agent.ID, err)
	}
	endpoint := AgentURL(baseURL, agent)
	fields["url"] = endpoint
	fields["preferredTransport"] = string(a2atypes.TransportProtocolJSONRPC)
	fields["additionalInterfaces"] = []a2atypes.AgentInterface{{URL: endpoint, Transport: a2atypes.TransportProtocolJSONRPC}}
	if v, _ := fields["protocolVersion"].(string); v == "" {
		fields["protocolVersion"] = string(a2atypes.Version)
	}
	fields["supportedInterfaces"] = []map[string]string{
		{"url": endpoint, "protocolBinding": string(a2atypes.TransportProtocolJSONRPC), "protocolVersion": Version10},
		{"url": endpoint, "protocolBinding": string(a2atypes.TransportProtocolJSONRPC), "protocolVersion": Version03},
	}
	return json.Marshal(fields)
}

func agentNotFoundMessage(idOrName string) string {
	return fmt.Sprintf("Agent '%s' not found", idOrName)
}

// RPC serves POST /a2a/{idOrName}: one JSON-RPC 2.0 request of the A2A v0.3 JSON-RPC binding
// (A2A spec §3.2.1, §7), or, with "A2A-Version: 1.0", of the A2A 1.0 binding (rpc10, same
// envelope and HTTP statuses, 1.0 method names and shapes). An A2A-Version other than 0.3 or
// 1.0 is -32009 "Version not supported" (negotiate) before the agent is looked up.
//
// Methods:
//   - message/send (§7.1): the reply of the agent's model to the message's text parts, as a
//     Message {"kind": "message", "role": "agent", "parts": [{"kind": "text", "text"}],
//     "messageId", "contextId"?, "taskId"?} (context and task ids echoed from the request).
//   - message/stream (§7.2): an SSE stream (§3.3), each `data:` one JSON-RPC response whose
//     result is, in order: the Task (§6.1, state "submitted", history = the user message);
//     a TaskStatusUpdateEvent (§7.2.2) "working", final false; TaskArtifactUpdateEvents
//     (§7.2.3) of one artifact carrying the text deltas (append true after the first,
//     lastChunk true on the last; each delta is sent when the next one arrives so that the
//     last can be marked, and an empty reply gives one empty chunk); a status-update
//     "completed", final true. A Completer error ends the stream with status-update "failed",
//     final true, whose status.message says why; tasks/cancel ends it with "canceled".
//   - tasks/get (§7.3): a task created by message/stream, with the history (trimmed to
//     params.historyLength) and the artifact text accumulated so far; otherwise -32001 "Task
//     not found". Only the task's creator (the key, a key of its team, or the master key; see
//     Owner and WithOwner) finds it: to anyone else it is -32001 exactly as an unknown id.
//   - tasks/cancel (§7.4): cancels a submitted or working task (its model call is stopped) and
//     returns it "canceled"; a task in a terminal state is -32002 "Task cannot be canceled";
//     an unknown one, or another caller's, -32001.
//   - tasks/pushNotificationConfig/*: -32003; agent/getAuthenticatedExtendedCard: -32007;
//     tasks/resubscribe: -32004 (as an SSE event); any other method: -32601.
//
// Errors (§8): not JSON → -32700 (id null); not a JSON-RPC 2.0 request → -32600; bad params →
// -32602 naming the field; Completer or lookup failure → -32603 (or the Completer's *Error,
// e.g. CodeUnauthorized when the caller's key may not use the agent's model).
//
// Notifications (a valid request without an "id" member) get HTTP 204 and no body; see
// notification.
//
// HTTP status: 200 for every JSON-RPC error, as the JSON-RPC binding and a2a-go's server do
// (a2a-go's client reads the error object only from a 200), except: unknown agent → 404 with
// {"jsonrpc": "2.0", "id", "error": {"code": -32000, "message": "Agent '<idOrName>' not
// found"}} (API.md, LiteLLM); a body over [MaxBodyBytes] → 413 with -32600. Once the method is
// known to stream (message/stream, tasks/resubscribe), errors are sent as one SSE event after
// a 200 text/event-stream header, since streaming clients only read SSE. The envelope is
// checked before the agent is looked up, so a malformed request costs no read-through.
func (h *Handler) RPC(w http.ResponseWriter, r *http.Request, idOrName string, c Call) {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, nil,
				invalidRequest("request body exceeds %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, nil, invalidRequest("read request body: %v", err))
		return
	}
	if e := checkBody(body); e != nil {
		writeError(w, http.StatusBadRequest, nil, e)
		return
	}
	req, rpcErr := parseRequest(body)
	if rpcErr != nil {
		writeError(w, http.StatusOK, req.id, rpcErr)
		return
	}
	ver, verErr := negotiate(r)
	log := h.logger(ctx).With().Str("agent", idOrName).Str("method", req.method).Logger()
	if req.notification {
		if verErr == nil {
			h.notification(ctx, w, &log, idOrName, req, ver)
		} else {
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	if verErr != nil {
		writeError(w, http.StatusOK, req.id, verErr)
		return
	}

	agent, err := h.resolver.ResolveAgent(ctx, idOrName)
	if errors.Is(err, ErrAgentNotFound) {
		writeError(w, http.StatusNotFound, req.id,
			&Error{Code: CodeAgentNotFound, Message: agentNotFoundMessage(idOrName)})
		return
	}
	if err != nil {
		log.Error().Err(err).Msg("resolve agent")
		writeError(w, http.StatusOK, req.id,
			&Error{Code: CodeInternalError, Message: "Internal error: agent lookup failed"})
		return
	}

	if ver == wire10 {
		h.rpc10(w, r, &log, agent, req, c)
		return
	}
	switch req.method {
	case MethodMessageSend:
		h.messageSend(w, r, &log, agent, req, wire03, c)
	case MethodMessageStream:
		h.messageStream(w, r, &log, agent, req, wire03, c)
	case MethodTasksGet:
		p, perr := parseTaskParams(req.params)
		if perr != nil {
			writeError(w, http.StatusOK, req.id, perr)
			return
		}
		task, ok := h.tasks.get(agent.ID, ownerFrom(ctx), p.id, p.historyLength)
		if !ok {
			writeError(w, http.StatusOK, req.id, taskNotFound(p.id))
			return
		}
		writeResult(w, req.id, task)
	case MethodTasksCancel:
		p, perr := parseTaskParams(req.params)
		if perr != nil {
			writeError(w, http.StatusOK, req.id, perr)
			return
		}
		task, cerr := h.tasks.cancel(agent.ID, ownerFrom(ctx), p.id)
		if cerr != nil {
			writeError(w, http.StatusOK, req.id, cerr)
			return
		}
		log.Debug().Str("task_id", p.id).Msg("task canceled")
		writeResult(w, req.id, task)
	case MethodTasksResubscribe:
		newSSEWriter(w, req.id).sendError(&Error{
			Code:    CodeUnsupportedOperation,
			Message: "This operation is not supported: tasks/resubscribe",
		})
	case MethodPushConfigSet, MethodPushConfigGet, MethodPushConfigList, MethodPushConfigDelete:
		writeError(w, http.StatusOK, req.id,
			&Error{Code: CodePushNotificationNotSupported, Message: "Push Notification is not supported"})
	case MethodGetExtendedAgentCard:
		writeError(w, http.StatusOK, req.id, &Error{
			Code:    CodeAuthenticatedExtendedCardNotConfigured,
			Message: "Authenticated Extended Card is not configured",
		})
	default:
		writeError(w, http.StatusOK, req.id,
			newError(CodeMethodNotFound, "Method not found", "%q", req.method))
	}
}

// notification handles a JSON-RPC notification (a request without "id", JSON-RPC 2.0 §4.1:
// "The Server MUST NOT reply to a Notification", errors included): HTTP 204 with no body
// whatever happens. (a2a-go's server answers such a request like one with id null; the spec
// is followed here.) A2A defines no notification methods, so only tasks/cancel, whose effect
// outlives the reply, is carried out; message/send and message/stream produce nothing but
// their reply, so they are not run (a model call nobody can read would only spend tokens), and
// every other method is ignored.
func (h *Handler) notification(ctx context.Context, w http.ResponseWriter, log *zerolog.Logger, idOrName string, req request, ver wire) {
	defer w.WriteHeader(http.StatusNoContent) // after the effect: the client may rely on it
	if cancel := map[wire]string{wire03: MethodTasksCancel, wire10: MethodCancelTask}[ver]; req.method != cancel {
		log.Debug().Msg("notification ignored")
		return
	}
	p, perr := parseTaskParams(req.params)
	if perr != nil {
		return
	}
	agent, err := h.resolver.ResolveAgent(ctx, idOrName)
	if err != nil {
		return
	}
	if _, cerr := h.tasks.cancel(agent.ID, ownerFrom(ctx), p.id); cerr == nil {
		log.Debug().Str("task_id", p.id).Msg("task canceled (notification)")
	}
}

// messageSend implements message/send (A2A spec §7.1) with a Message result, and A2A 1.0
// SendMessage (ver wire10) with the same Message as SendMessageResponse {"message"}.
func (h *Handler) messageSend(w http.ResponseWriter, r *http.Request, log *zerolog.Logger, agent *Agent, req request, ver wire, c Call) {
	p, perr := ver.parseSendParams(req.params)
	if perr != nil {
		writeError(w, http.StatusOK, req.id, perr)
		return
	}
	reply, err := h.completer.Complete(r.Context(), c, agent, p.text)
	if err != nil {
		log.Warn().Err(err).Str("agent_id", agent.ID).Msg("message/send: completion failed")
		writeError(w, http.StatusOK, req.id, internalError(err))
		return
	}
	writeResult(w, req.id, ver.result(&a2atypes.Message{
		ID:        uuid.NewString(),
		Role:      a2atypes.MessageRoleAgent,
		Parts:     a2atypes.ContentParts{a2atypes.TextPart{Text: reply}},
		ContextID: p.message.ContextID,
		TaskID:    p.message.TaskID,
	}))
}

// errTaskFinished stops a Completer stream whose task was canceled.
var errTaskFinished = errors.New("task already in a terminal state")

// messageStream implements message/stream (A2A spec §7.2); see RPC for the event sequence.
// With ver wire10 it is A2A 1.0 SendStreamingMessage: the same events, each sent as its 1.0
// StreamResponse member (result10).
func (h *Handler) messageStream(w http.ResponseWriter, r *http.Request, log *zerolog.Logger, agent *Agent, req request, ver wire, c Call) {
	out := newSSEWriter(w, req.id)
	out.ver = ver
	p, perr := ver.parseSendParams(req.params)
	if perr != nil {
		out.sendError(perr)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	entry, task := h.tasks.create(agent.ID, ownerFrom(r.Context()), p.message, cancel)
	log = ptr(log.With().Str("agent_id", agent.ID).Str("task_id", entry.id).Logger())
	info := a2atypes.TaskInfo{TaskID: a2atypes.TaskID(entry.id), ContextID: entry.contextID}
	statusEvent := func(status a2atypes.TaskStatus, final bool) *a2atypes.TaskStatusUpdateEvent {
		return &a2atypes.TaskStatusUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Status: status, Final: final}
	}

	if out.send(task) != nil {
		h.abandon(log, entry, out.err)
		return
	}
	status, ok := h.tasks.setWorking(entry)
	if !ok { // canceled in the meantime
		_ = out.send(statusEvent(status, true))
		return
	}
	if out.send(statusEvent(status, false)) != nil {
		h.abandon(log, entry, out.err)
		return
	}

	chunks := 0
	emit := func(text string, last bool) error {
		ev := &a2atypes.TaskArtifactUpdateEvent{
			TaskID:    info.TaskID,
			ContextID: info.ContextID,
			Append:    chunks > 0,
			LastChunk: last,
			Artifact: &a2atypes.Artifact{
				ID:    a2atypes.ArtifactID(entry.artifactID),
				Name:  artifactName,
				Parts: a2atypes.ContentParts{a2atypes.TextPart{Text: text}},
			},
		}
		chunks++
		return out.send(ev)
	}
	var pending string
	havePending := false
	streamErr := h.completer.Stream(ctx, c, agent, p.text, func(delta string) error {
		if delta == "" {
			return nil
		}
		if !h.tasks.appendText(entry, delta) {
			return errTaskFinished
		}
		if havePending {
			if err := emit(pending, false); err != nil {
				return err
			}
		}
		pending, havePending = delta, true
		return nil
	})
	if out.err != nil || r.Context().Err() != nil {
		h.abandon(log, entry, errors.Join(out.err, r.Context().Err()))
		return
	}

	if streamErr == nil {
		if havePending || chunks == 0 {
			_ = emit(pending, true)
		}
		status = h.tasks.finish(entry, a2atypes.TaskStateCompleted, nil)
	} else {
		if havePending {
			_ = emit(pending, false)
		}
		rpcErr := internalError(streamErr)
		failure := a2atypes.NewMessageForTask(a2atypes.MessageRoleAgent, info, a2atypes.TextPart{Text: rpcErr.Message})
		status = h.tasks.finish(entry, a2atypes.TaskStateFailed, failure)
		if status.State == a2atypes.TaskStateFailed {
			log.Warn().Err(streamErr).Msg("message/stream: completion failed")
		}
	}
	if out.send(statusEvent(status, true)) != nil {
		log.Debug().Err(out.err).Msg("message/stream: client gone before the final event")
		return
	}
	log.Debug().Str("state", string(status.State)).Int("chunks", chunks).Msg("message/stream done")
}

// abandon marks a task whose client went away as failed.
func (h *Handler) abandon(log *zerolog.Logger, e *taskEntry, cause error) {
	info := a2atypes.TaskInfo{TaskID: a2atypes.TaskID(e.id), ContextID: e.contextID}
	msg := a2atypes.NewMessageForTask(a2atypes.MessageRoleAgent, info,
		a2atypes.TextPart{Text: "stream aborted: the client disconnected"})
	h.tasks.finish(e, a2atypes.TaskStateFailed, msg)
	log.Debug().Err(cause).Msg("message/stream: client gone")
}

func ptr[T any](v T) *T { return &v }

// sseWriter writes JSON-RPC responses as Server-Sent Events (A2A spec §3.3): one `data:` line
// per response, flushed at once. The 200 text/event-stream header goes out with the first
// event. After the first write error every send returns it.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      json.RawMessage
	ver     wire // results are converted to this version's shapes
	started bool
	err     error
}

func newSSEWriter(w http.ResponseWriter, id json.RawMessage) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), id: id}
}

func (s *sseWriter) send(result any) error {
	return s.write(response{JSONRPC: "2.0", ID: s.id, Result: s.ver.result(result)})
}

func (s *sseWriter) sendError(e *Error) {
	_ = s.write(response{JSONRPC: "2.0", ID: s.id, Error: e})
}

func (s *sseWriter) write(resp response) error {
	if s.err != nil {
		return s.err
	}
	data, err := json.Marshal(resp)
	if err != nil {
		s.err = fmt.Errorf("encode event: %w", err)
		return s.err
	}
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", data); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return err
	}
	return nil
}
