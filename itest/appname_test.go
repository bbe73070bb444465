package itest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// TestPoolConnectionsNameTheReplica: every server session a replica opens carries its replica
// id in application_name (pg_stat_activity): the pool's lockstep-pool-<id>, the change feed's
// lockstep-listener-<id>, so an operator can count and attribute connections per replica.
func TestPoolConnectionsNameTheReplica(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	StartGateway(t, db, "named", GatewayOpts{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pool, listener, other int
	require.NoError(t, conn.QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE application_name = 'lockstep-pool-named'),
		count(*) FILTER (WHERE application_name = 'lockstep-listener-named'),
		count(*) FILTER (WHERE application_name NOT IN ('lockstep-pool-named', 'lockstep-listener-named'))
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).
		Scan(&pool, &listener, &other))
	require.Positive(t, pool, "pool connections named after the replica")
	require.Equal(t, 1, listener)
	require.Zero(t, other, "every connection of the replica is named")
}
