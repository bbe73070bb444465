package store

import "context"

// ProjectKeys names up to 5 keys linked to project id (litellm_fields.project_id, sql/020),
// each "key <token hash>": LiteLLM's delete_project refuses a project that still has keys. A
// scan of gateway.api_keys (no index: deleting a project is rare).
func (t *TxStore) ProjectKeys(ctx context.Context, id string) ([]string, error) {
	return t.links(ctx, "project", id, `SELECT 'key ' || token FROM gateway.api_keys
		WHERE litellm_fields->>'project_id' = $1 LIMIT 5`)
}
