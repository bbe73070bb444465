package a2a

import (
	"net/http"

	"github.com/rs/zerolog"
)

// rpc10 serves one request of the A2A 1.0 JSON-RPC binding (A2A 1.0 spec §9, selected by
// "A2A-Version: 1.0"; see RPC for the envelope, HTTP statuses and the unknown-agent answer,
// which are the same for both versions). The tasks are those of the 0.3 methods: a task made
// by message/stream is read by GetTask, and one made by SendStreamingMessage by tasks/get, on
// any replica.
//
// Methods:
//   - SendMessage (§3.1.1): the reply of the agent's model as SendMessageResponse
//     {"message": {"messageId", "role": "ROLE_AGENT", "parts": [{"text"}], "contextId"?, "taskId"?}}.
//   - SendStreamingMessage (§3.1.2): SSE, each `data:` one JSON-RPC response whose result is a
//     StreamResponse: {"task"} (TASK_STATE_SUBMITTED), {"statusUpdate"} TASK_STATE_WORKING,
//     {"artifactUpdate"} chunks (append, lastChunk as in 0.3), {"statusUpdate"} with the
//     terminal state (TASK_STATE_COMPLETED, _FAILED or _CANCELED); the stream then ends (1.0
//     has no "final" flag).
//   - GetTask (§3.1.3) {id, historyLength?} and CancelTask {id} → the Task in 1.0 shapes;
//     errors as tasks/get and tasks/cancel (-32001 for an unknown task or another caller's,
//     -32002 for a task in a terminal state).
//   - ListTasks (§3.1.4): the caller's tasks of this agent (see listTasks).
//   - SubscribeToTask: -32004 (as an SSE event); the push-notification config methods: -32003;
//     GetExtendedAgentCard: -32007; anything else (0.3 names included): -32601.
func (h *Handler) rpc10(w http.ResponseWriter, r *http.Request, log *zerolog.Logger, agent *Agent, req request, c Call) {
	ctx := r.Context()
	switch req.method {
	case MethodSendMessage:
		h.messageSend(w, r, log, agent, req, wire10, c)
	case MethodSendStreamingMessage:
		h.messageStream(w, r, log, agent, req, wire10, c)
	case MethodGetTask:
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
		writeResult(w, req.id, wire10.taskResult(task))
	case MethodCancelTask:
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
		writeResult(w, req.id, wire10.taskResult(task))
	case MethodListTasks:
		q, perr := parseListParams(req.params)
		if perr != nil {
			writeError(w, http.StatusOK, req.id, perr)
			return
		}
		res, err := h.tasks.list(ctx, agent.ID, ownerFrom(ctx), q)
		if err != nil {
			log.Warn().Err(err).Msg("ListTasks failed")
			writeError(w, http.StatusOK, req.id, internalError(err))
			return
		}
		writeResult(w, req.id, res)
	case MethodSubscribeToTask:
		newSSEWriter(w, req.id).sendError(&Error{
			Code:    CodeUnsupportedOperation,
			Message: "This operation is not supported: SubscribeToTask",
		})
	case MethodCreatePushConfig, MethodGetPushConfig, MethodListPushConfigs, MethodDeletePushConfig:
		writeError(w, http.StatusOK, req.id,
			&Error{Code: CodePushNotificationNotSupported, Message: "Push Notification is not supported"})
	case MethodGetExtendedCard10:
		writeError(w, http.StatusOK, req.id, &Error{
			Code:    CodeAuthenticatedExtendedCardNotConfigured,
			Message: "Extended Agent Card is not configured",
		})
	default:
		writeError(w, http.StatusOK, req.id,
			newError(CodeMethodNotFound, "Method not found", "%q", req.method))
	}
}
