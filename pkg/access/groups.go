package access

// LiteLLM's route groups (litellm/proxy/_types.py LiteLLMRoutes, commit
// 00145f91a8cbcac1f181228efe7acd0cfa71a731): a key's allowed_routes may name one and then
// allows every route in it. The lists are LiteLLM's, word for word, so a key scoped to a group
// is allowed on lockstep exactly the routes it is allowed on LiteLLM; routes lockstep does not
// serve stay in them harmlessly (they answer 404 either way). Additions of lockstep's own are
// marked.

var openAIRoutes = []string{
	"/engines/{model}/chat/completions", "/openai/deployments/{model}/chat/completions",
	"/chat/completions", "/v1/chat/completions", "/cursor/chat/completions", "/cursor/models", "/cursor/v1/models",
	"/engines/{model}/completions", "/openai/deployments/{model}/completions", "/completions", "/v1/completions",
	"/engines/{model}/embeddings", "/openai/deployments/{model}/embeddings", "/embeddings", "/v1/embeddings",
	"/images/generations", "/v1/images/generations", "/images/edits", "/v1/images/edits",
	"/videos", "/v1/videos", "/videos/{video_id}", "/v1/videos/{video_id}", "/videos/{video_id}/content",
	"/v1/videos/{video_id}/content", "/videos/{video_id}/remix", "/v1/videos/{video_id}/remix",
	"/audio/transcriptions", "/v1/audio/transcriptions", "/audio/speech", "/v1/audio/speech",
	"/moderations", "/v1/moderations",
	"/v1/batches", "/batches", "/v1/batches/{batch_id}", "/batches/{batch_id}", "/v1/batches/{batch_id}/cancel",
	"/batches/{batch_id}/cancel",
	"/v1/files", "/files", "/v1/files/{file_id}", "/files/{file_id}", "/v1/files/{file_id}/content", "/files/{file_id}/content",
	"/fine_tuning/jobs", "/v1/fine_tuning/jobs", "/fine_tuning/jobs/{fine_tuning_job_id}/cancel",
	"/v1/fine_tuning/jobs/{fine_tuning_job_id}/cancel",
	"/assistants", "/v1/assistants", "/v1/assistants/{assistant_id}", "/assistants/{assistant_id}", "/threads",
	"/v1/threads", "/threads/{thread_id}", "/v1/threads/{thread_id}", "/threads/{thread_id}/messages",
	"/v1/threads/{thread_id}/messages", "/threads/{thread_id}/runs", "/v1/threads/{thread_id}/runs",
	"/models", "/v1/models",
	"/utils/token_counter", "/utils/transform_request",
	"/rerank", "/v1/rerank", "/v2/rerank",
	"/realtime", "/v1/realtime", "/openai/v1/realtime",
	"/realtime/client_secrets", "/v1/realtime/client_secrets", "/openai/v1/realtime/client_secrets",
	"/realtime/calls", "/v1/realtime/calls", "/openai/v1/realtime/calls", "/realtime/transcription_sessions",
	"/v1/realtime/transcription_sessions", "/openai/v1/realtime/transcription_sessions",
	"/responses", "/v1/responses", "/openai/v1/responses", "/responses/{response_id}", "/v1/responses/{response_id}",
	"/openai/v1/responses/{response_id}", "/responses/{response_id}/input_items", "/v1/responses/{response_id}/input_items",
	"/openai/v1/responses/{response_id}/input_items", "/responses/{response_id}/cancel",
	"/v1/responses/{response_id}/cancel", "/openai/v1/responses/{response_id}/cancel",
	"/vector_stores", "/v1/vector_stores", "/vector_stores/{vector_store_id}", "/v1/vector_stores/{vector_store_id}",
	"/vector_stores/{vector_store_id}/search", "/v1/vector_stores/{vector_store_id}/search",
	"/vector_stores/{vector_store_id}/files", "/v1/vector_stores/{vector_store_id}/files",
	"/vector_stores/{vector_store_id}/files/{file_id}", "/v1/vector_stores/{vector_store_id}/files/{file_id}",
	"/vector_stores/{vector_store_id}/files/{file_id}/content", "/v1/vector_stores/{vector_store_id}/files/{file_id}/content",
	"/vector_store/list", "/v1/vector_store/list",
	"/search", "/v1/search", "/search/{search_tool_name}", "/v1/search/{search_tool_name}",
	"/ocr", "/v1/ocr",
	"/containers", "/v1/containers", "/containers/*", "/v1/containers/*",
	// lockstep: Azure's Responses route without a deployment (azure_routes.go)
	"/openai/responses",
}

var mappedPassThroughRoutes = []string{
	"/bedrock", "/comprehendmedical", "/vertex-ai", "/vertex_ai", "/cohere", "/cursor", "/gemini", "/anthropic",
	"/langfuse", "/azure", "/azure_ai", "/openai", "/openai_passthrough", "/assemblyai", "/eu.assemblyai", "/vllm",
	"/mistral", "/milvus", "/watsonx",
}

var anthropicRoutes = []string{
	"/v1/messages", "/v1/messages/count_tokens", "/v1/skills", "/v1/skills/{skill_id}",
	// lockstep: Anthropic's Messages route without /v1 (format.FormatMessages.Path)
	"/messages",
}

var mcpInferenceRoutes = []string{
	"/mcp", "/mcp/", "/mcp/{subpath}", "/mcp/tools", "/mcp/tools/list", "/mcp/tools/call", "/mcp-rest/tools/list",
	"/mcp-rest/tools/call", "/v1/mcp/tools",
}

var mcpManagementRoutes = []string{"/v1/mcp/server", "/v1/mcp/server/{path:path}"}

var agentInferenceRoutes = []string{
	"/agents", "/a2a/{agent_id}", "/a2a/{agent_id}/message/send", "/a2a/{agent_id}/message/stream",
	"/a2a/{agent_id}/.well-known/agent-card.json",
	// lockstep: the A2A 0.2 card name (agents.go serves both)
	"/a2a/{agent_id}/.well-known/agent.json",
}

var agentManagementRoutes = []string{
	"/v1/agents", "/v1/agents/{agent_id}", "/v1/agents/make_public", "/v1/agents/{agent_id}/make_public",
}

var googleRoutes = []string{
	"/v1beta/models/{model_name:path}:countTokens", "/v1beta/models/{model_name:path}:generateContent",
	"/v1beta/models/{model_name:path}:streamGenerateContent", "/models/{model_name:path}:countTokens",
	"/models/{model_name:path}:generateContent", "/models/{model_name:path}:streamGenerateContent",
	"/interactions", "/v1beta/interactions", "/interactions/{interaction_id}", "/v1beta/interactions/{interaction_id}",
	"/interactions/{interaction_id}/cancel", "/v1beta/interactions/{interaction_id}/cancel",
	"/v1beta/agents", "/v1beta/agents/{name}", "/v1beta/agents/{name}/versions",
}

var infoRoutes = []string{
	"/key/info", "/key/health", "/team/info", "/team/list", "/v2/team/list", "/organization/list", "/team/available",
	"/team/metadata_schema", "/user/info", "/v2/user/info", "/model/info", "/v1/model/info", "/v2/model/info",
	"/v2/key/info", "/model_group/info", "/health", "/health/services", "/key/list", "/user/filter/ui", "/models",
	"/v1/models", "/sso/get/ui_settings", "/get/user_banner",
}

var keyManagementRoutes = []string{
	"/key/generate", "/key/update", "/key/delete", "/key/info", "/key/regenerate", "/key/service-account/generate",
	"/key/{key_id}/regenerate", "/key/list", "/key/block", "/key/unblock", "/key/bulk_update", "/team/key/bulk_update",
	"/team/daily/activity", "/team/daily/activity/aggregated", "/spend/logs", "/spend/logs/v2", "/key/{key_id}/reset_spend",
	"/key/aliases", "/key/access_group",
}

var spendTrackingRoutes = []string{
	"/spend/keys", "/spend/users", "/spend/tags", "/spend/calculate", "/spend/logs", "/spend/logs/v2", "/spend/logs/ui",
	"/spend/logs/session/ui", "/key/spend/report", "/user/spend/report", "/team/spend/report", "/organization/spend/report",
	"/management/v1/spend_logs/end_users", "/management/v1/spend_logs/users", "/cost/estimate",
}

// GlobalSpendRoutes is LiteLLM's global_spend_tracking_routes: proxy-wide spend, which a
// non-admin key reaches only with the get_spend_routes permission (route_checks.py).
var GlobalSpendRoutes = []string{
	"/global/spend/logs", "/global/spend", "/global/spend/keys", "/global/spend/teams", "/global/spend/end_users",
	"/global/spend/models", "/global/predict/spend/logs", "/global/spend/report", "/global/spend/provider",
	"/global/spend/tags", "/global/spend/all_tag_names",
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func suffixed(list []string, suffix string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s + suffix
	}
	return out
}

var managementRoutes = concat([]string{
	"/user/new", "/user/update", "/user/bulk_update", "/user/delete", "/user/info", "/user/list",
	"/user/daily/activity", "/user/daily/activity/aggregated",
	"/team/new", "/team/update", "/team/{team_id}", "/team/delete", "/team/list", "/v2/team/list", "/team/info",
	"/team/block", "/team/unblock", "/team/available", "/team/metadata_schema", "/team/permissions_list",
	"/team/permissions_update", "/team/permissions_bulk_update", "/team/daily/activity", "/team/daily/activity/aggregated",
	"/gateway/daily/activity",
	"/model/new", "/model/update", "/model/delete", "/model/info",
	"/jwt/key/mapping/new", "/jwt/key/mapping/update", "/jwt/key/mapping/delete", "/jwt/key/mapping/list",
	"/jwt/key/mapping/info",
}, keyManagementRoutes, mcpManagementRoutes, agentManagementRoutes)

// Groups are LiteLLM's LiteLLMRoutes members a key's allowed_routes may name, by name.
var Groups = map[string][]string{
	"openai_routes":                openAIRoutes,
	"anthropic_routes":             anthropicRoutes,
	"google_routes":                googleRoutes,
	"mapped_pass_through_routes":   mappedPassThroughRoutes,
	"passthrough_routes_wildcard":  suffixed(mappedPassThroughRoutes, "/*"),
	"apply_guardrail_routes":       {"/guardrails/apply_guardrail"},
	"model_info_routes":            {"/model/info", "/v1/model/info"},
	"mcp_inference_routes":         mcpInferenceRoutes,
	"mcp_management_routes":        mcpManagementRoutes,
	"mcp_routes":                   concat(mcpInferenceRoutes, mcpManagementRoutes),
	"agent_inference_routes":       agentInferenceRoutes,
	"agent_management_routes":      agentManagementRoutes,
	"agent_routes":                 concat(agentInferenceRoutes, agentManagementRoutes),
	"info_routes":                  infoRoutes,
	"key_management_routes":        keyManagementRoutes,
	"management_routes":            managementRoutes,
	"spend_tracking_routes":        spendTrackingRoutes,
	"global_spend_tracking_routes": GlobalSpendRoutes,
	"master_key_only_routes":       {"/global/spend/reset", "/memory-usage-in-mem-cache", "/memory-usage-in-mem-cache-items"},
	"litellm_native_routes":        {"/rag/ingest", "/v1/rag/ingest", "/rag/query", "/v1/rag/query"},
	"llm_api_routes": concat(openAIRoutes, anthropicRoutes, googleRoutes, mappedPassThroughRoutes,
		suffixed(mappedPassThroughRoutes, "/*"), []string{"/guardrails/apply_guardrail"}, mcpInferenceRoutes,
		[]string{"/rag/ingest", "/v1/rag/ingest", "/rag/query", "/v1/rag/query"}, agentInferenceRoutes,
		[]string{"/model/info", "/v1/model/info"},
		// lockstep: its own apply-guardrail alias (guardrails.go)
		[]string{"/apply_guardrail"}),
}
