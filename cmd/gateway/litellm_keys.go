package main

import "sort"

// liteLLMGeneralSettings are the general_settings keys LiteLLM's proxy defines, read from
// BerriAI/litellm (main, a version after v1.84.0, December 2026): the fields of
// ConfigGeneralSettings in litellm/proxy/_types.py (commit 0bf90f0c) and the
// "general_settings - Reference" table of docs/my-website/docs/proxy/config_settings.md
// (commit 00670428), which lists keys the proxy reads with general_settings.get(...) that the
// class does not declare. lockstep accepts them (a LiteLLM config loads as it is) and logs the
// ones it does not implement once at start; any other key is refused naming it (a typo such
// as master_kye would otherwise start the gateway with no master key). Update this list, with
// the commits read, when LiteLLM adds keys.
var liteLLMGeneralSettings = []string{
	// ConfigGeneralSettings (litellm/proxy/_types.py)
	"completion_model", "plugins", "key_management_system", "use_google_kms", "use_azure_key_vault",
	"master_key", "coordination_redis", "control_plane_url", "allow_cli_sso_verification_uri_complete",
	"database_url", "database_connection_pool_limit", "database_connection_timeout",
	"database_connect_timeout", "database_socket_timeout", "database_extra_connection_params",
	"database_disable_prepared_statements", "database_type", "database_args", "otel", "custom_auth",
	"max_parallel_requests", "global_max_parallel_requests", "max_request_size_mb",
	"max_batch_file_size_mb", "max_response_size_mb", "proxy_config_reload_interval_seconds",
	"cancel_on_disconnect", "infer_model_from_keys", "background_health_checks",
	"health_check_interval", "health_check_concurrency", "health_check_skip_disabled_background_models",
	"background_health_check_model_groups", "model_list_healthy_only", "alerting", "alert_types",
	"alert_to_webhook_url", "alerting_args", "alerting_threshold", "ui_access_mode", "allowed_routes",
	"reject_clientside_metadata_tags", "enable_public_model_hub", "pass_through_request_timeout",
	"pass_through_endpoints", "user_header_name", "user_header_mappings", "supported_db_objects",
	"user_mcp_management_mode", "store_prompts_in_spend_logs", "disable_auto_add_proxy_admin_to_teams",
	"scheduled_job_stagger", "maximum_spend_logs_retention_period",
	"maximum_autorouter_session_retention_period", "maximum_health_check_retention_period",
	"use_spend_logs_partitioning", "maximum_spend_logs_cleanup_batch_size",
	"maximum_spend_logs_cleanup_max_batches", "maximum_spend_logs_cleanup_run_budget",
	"maximum_spend_logs_cleanup_batch_timeout", "mcp_internal_ip_ranges", "mcp_trusted_proxy_ranges",
	"mcp_xff_num_trusted_hops", "trusted_proxy_ranges", "store_model_in_db",
	"forward_client_headers_to_llm_api", "mcp_required_fields", "disable_budget_reservation",
	"apply_user_budget_to_team_keys", "user_url_validation", "user_url_allowed_hosts",
	"provider_url_destination_allowed_hosts",
	// config_settings.md "general_settings - Reference", not declared by the class
	"disable_spend_logs", "disable_spend_updates", "disable_master_key_return",
	"disable_retry_on_max_parallel_request_limit_error", "disable_reset_budget",
	"disable_adding_master_key_hash_to_db", "disable_responses_id_security", "enable_jwt_auth",
	"enforce_user_param", "allow_requests_on_db_unavailable", "use_client_credentials_pass_through_routes",
	"health_check_details", "public_routes", "enforced_params", "enable_oauth2_auth", "use_x_forwarded_for",
	"service_account_settings", "image_generation_model", "proxy_budget_rescheduler_min_time",
	"proxy_budget_rescheduler_max_time", "proxy_batch_write_at", "proxy_batch_polling_interval",
	"custom_key_generate", "allowed_ips", "embedding_model", "default_team_disabled",
	"key_management_settings", "allow_user_auth", "user_api_key_cache_ttl", "disable_prisma_schema_update",
	"litellm_key_header_name", "moderation_model", "custom_sso", "allow_client_side_credentials",
	"admin_only_routes", "spend_report_frequency", "litellm_jwtauth", "litellm_license",
	"oauth2_config_mappings", "enable_oauth2_proxy_auth", "forward_openai_org_id",
	"maximum_spend_logs_retention_interval",
}

// didYouMean is the candidate closest to key by optimal string alignment distance
// (Damerau-Levenshtein with adjacent transpositions: "master_kye" → "master_key" is 1), when
// it is at most 2 and under a third of key's length; "" otherwise. Ties: the first in sorted
// order.
func didYouMean(key string, candidates []string) string {
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	best, bestD := "", 3
	for _, c := range sorted {
		if d := osaDistance(key, c); d < bestD && d*3 < len(key) {
			best, bestD = c, d
		}
	}
	return best
}

// osaDistance is the optimal string alignment distance of a and b (bytes: the keys are ASCII).
func osaDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
