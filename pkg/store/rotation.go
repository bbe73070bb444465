package store

import (
	"context"
	"fmt"
)

// Scheduled key rotation (LiteLLM's KeyRotationManager, litellm/proxy/common_utils/
// key_rotation_manager.py): a key whose litellm_fields hold auto_rotate true and a
// rotation_interval is due once its key_rotation_at has passed (or it has none). The fields
// are kept in litellm_fields (sql/011); key_rotation_at is written in RotationTimeLayout, so
// a due check is a text comparison that no malformed row can make fail (sql/018 indexes the
// auto-rotating keys).

// RotationTimeLayout is the layout (always UTC, always microseconds) key_rotation_at and
// last_rotation_at are stored and returned in: fixed width, so text order is time order.
const RotationTimeLayout = "2006-01-02T15:04:05.000000Z"

// TryLockName takes the transaction-scoped advisory lock named name if no other transaction
// holds it (pg_try_advisory_xact_lock of its hashtextextended, Postgres "Advisory Locks";
// held through PgBouncer's transaction pooling): false, at once, when another holds it.
func (t *TxStore) TryLockName(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := t.tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", name).Scan(&ok)
	return ok, mapErr(err)
}

// DueKeyRotations reads up to limit keys due for rotation at now (RotationTimeLayout):
// auto_rotate true, a non-empty rotation_interval, and key_rotation_at absent or not after
// now. The rows are locked until the transaction ends; a row another transaction holds is
// skipped (FOR UPDATE SKIP LOCKED). Errors: ErrUnavailable.
func (t *TxStore) DueKeyRotations(ctx context.Context, now string, limit int) ([]Row, error) {
	rows, err := t.tx.Query(ctx, `SELECT t.token, t.version, row_to_json(t)::text FROM gateway.api_keys t
		WHERE t.litellm_fields->>'auto_rotate' = 'true'
		  AND coalesce(t.litellm_fields->>'rotation_interval', '') <> ''
		  AND coalesce(t.litellm_fields->>'key_rotation_at', '') <= $1
		ORDER BY t.litellm_fields->>'key_rotation_at' NULLS FIRST, t.token
		LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due key rotations: %w", mapErr(err))
	}
	return scanRows(Key, rows)
}
