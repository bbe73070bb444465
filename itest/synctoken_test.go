package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

const syncTokenHeader = "x-lockstep-sync-token"

// doToken sends a master-key request carrying token (when not empty) and returns the status,
// body and the sync token of the answer.
func (g *Gateway) doToken(t testing.TB, token, method, path string, body any) (int, []byte, string) {
	t.Helper()
	j, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, g.URL+path, bytes.NewReader(j))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(syncTokenHeader, token)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out, resp.Header.Get(syncTokenHeader)
}

// TestSyncTokenReadYourWritesAcrossReplicas (issue 10): 1000 rounds of create on A → call B
// with the token (served), delete on A → call B with the token (never served: 400 unknown).
// B holds the model when the delete commits, so without the token B would serve it until the
// notification lands; with it, B answers only after applying the delete.
func TestSyncTokenReadYourWritesAcrossReplicas(t *testing.T) {
	t.Parallel()
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	p := StartPair(t, GatewayOpts{})
	for i := range rounds {
		id := fmt.Sprintf("tok-%d", i)
		st, b, tok := p.A.doToken(t, "", "POST", "/model/new", map[string]any{
			"model_name": id, "model_info": map[string]any{"id": id},
			"litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"},
		})
		require.Equal(t, 200, st, "%s", b)
		require.NotEmpty(t, tok, "a management write answers with a sync token")
		st, b, _ = p.B.doToken(t, tok, "POST", "/v1/chat/completions", chatBody(id, "x", false))
		require.Equal(t, 200, st, "round %d: created on A, B with the token: %s", i, b)

		st, b, tok = p.A.doToken(t, "", "POST", "/model/delete", map[string]any{"id": id})
		require.Equal(t, 200, st, "%s", b)
		require.NotEmpty(t, tok)
		st, b, _ = p.B.doToken(t, tok, "POST", "/v1/chat/completions", chatBody(id, "x", false))
		require.Equal(t, 400, st, "round %d: deleted on A, served on B with the token: %s", i, b)
		require.Equal(t, unknownModelText(id), errMessage(t, b))
	}
	// reads carry no token; a token on a read route is honoured too
	st, _, tok := p.A.doToken(t, "", "GET", "/model/info", nil)
	require.Equal(t, 200, st)
	require.Empty(t, tok, "reads answer without a token")
}

// TestSyncTokenTimesOutWith503: a replica whose change feed cannot prove it applied the write
// (its listener backend held stopped) answers a token-carrying request after 2 s with 503
// "replica <id> has not applied the requested write yet"; requests without a token are served.
func TestSyncTokenTimesOutWith503(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	_, _, tok := p.A.doToken(t, "", "POST", "/model/new", map[string]any{
		"model_name": "held", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"},
	})
	require.NotEmpty(t, tok)
	pid := listenerBackend(t, p.DB, "b")
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	defer syscall.Kill(pid, syscall.SIGCONT) //nolint:errcheck
	st, b, _ := p.B.doToken(t, tok, "GET", "/v1/models", nil)
	require.Equal(t, 503, st, "%s", b)
	require.Equal(t, "replica b has not applied the requested write yet", errMessage(t, b))
	st, _, _ = p.B.doToken(t, "", "GET", "/v1/models", nil)
	require.Equal(t, 200, st)
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	Eventually(t, "token honoured once the listener resumes", func() bool {
		st, _, _ := p.B.doToken(t, tok, "GET", "/v1/models", nil)
		return st == 200
	})
}

// listenerBackend is the pid of the Postgres backend serving replica id's LISTEN connection.
func listenerBackend(t testing.TB, dbURL, id string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.Eventually(t, func() bool {
		return conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = $1 ORDER BY backend_start DESC LIMIT 1`, "lockstep-listener-"+id).Scan(&pid) == nil
	}, 10*time.Second, 10*time.Millisecond)
	return pid
}

// A refused management write stored nothing, so it answers without a sync token; a write that
// succeeds carries one.
func TestSyncTokenOnlyOnSuccessfulWrites(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, b, tok := p.A.doToken(t, "", "POST", "/key/generate", map[string]any{"rpm_limt": 1})
	require.Equal(t, 400, st, "%s", b)
	require.Empty(t, tok, "a refused write must not answer with a sync token")
	st, b, tok = p.A.doToken(t, "", "POST", "/key/generate", map[string]any{})
	require.Equal(t, 200, st, "%s", b)
	require.NotEmpty(t, tok)
}
