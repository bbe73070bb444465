package store

import (
	"context"
	"fmt"
)

// GetByNameForShare reads the row of typ whose name column (Table.Name: policy_name for
// policies) is name and takes a FOR SHARE lock on it until the transaction ends, as
// GetForShare by primary key (a key or team attaching a policy while /policies/{id} DELETE
// runs). Errors: ErrNotFound, ErrUnavailable.
func (t *TxStore) GetByNameForShare(ctx context.Context, typ ObjectType, name string) (Row, error) {
	ti, err := info(typ)
	if err != nil {
		return Row{}, err
	}
	sql := fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE t.%s = $1 FOR SHARE", ti.PK, ti.Table, ti.Name)
	return queryRow(ctx, t.tx, typ, "get", sql, []any{name})
}

// PolicyLinks names up to 5 objects that use policy name (sql/017): keys and teams whose
// litellm_fields.policies lists it, policies that inherit it and attachments (sql/021) that
// attach it, each "<kind> <id>" (a key by its token hash, an attachment by attachment_id). A
// scan of the key, team and policy tables (no index: deleting or renaming a policy is rare).
func (t *TxStore) PolicyLinks(ctx context.Context, name string) ([]string, error) {
	return t.links(ctx, "policy", name, `SELECT kind || ' ' || oid FROM (
		SELECT 'key' AS kind, token AS oid FROM gateway.api_keys WHERE litellm_fields->'policies' ? $1
		UNION ALL SELECT 'team', team_id FROM gateway.teams WHERE litellm_fields->'policies' ? $1
		UNION ALL SELECT 'policy', policy_name FROM gateway.policies WHERE inherit = $1
		UNION ALL SELECT 'attachment', attachment_id FROM gateway.policy_attachments WHERE policy_name = $1
	) l LIMIT 5`)
}
