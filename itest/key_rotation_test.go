package itest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// rotationEnv turns the scheduled key rotation job on (LiteLLM's settings) with a check every
// second.
var rotationEnv = []string{"LITELLM_KEY_ROTATION_ENABLED=true", "LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS=1"}

// keysByAlias lists g's keys (/key/list) by key_alias.
func keysByAlias(t *testing.T, g *Gateway) map[string]map[string]any {
	t.Helper()
	st, body := g.Do(t, "GET", "/key/list?size=100", nil)
	require.Equal(t, 200, st, "%s", body)
	out := map[string]map[string]any{}
	for _, k := range JSON(t, body)["keys"].([]any) {
		m := k.(map[string]any)
		if alias, ok := m["key_alias"].(string); ok {
			out[alias] = m
		}
	}
	return out
}

// rotationGap is key_rotation_at - last_rotation_at of a key answer.
func rotationGap(t *testing.T, k map[string]any) time.Duration {
	t.Helper()
	next, err := time.Parse(time.RFC3339Nano, k["key_rotation_at"].(string))
	require.NoError(t, err)
	last, err := time.Parse(time.RFC3339Nano, k["last_rotation_at"].(string))
	require.NoError(t, err)
	return next.Sub(last)
}

// auto_rotate + rotation_interval (LiteLLM's KeyRotationManager): with the job on in two
// replicas, every due key is rotated exactly once (one replica holds the rotation lock; the
// other skips), through /key/regenerate's write: the old secret is refused on both replicas,
// the new token carries rotation_count 1, last_rotation_at and key_rotation_at =
// last_rotation_at + rotation_interval in /key/info and /key/list on either replica. A key
// whose short interval elapses on its own is rotated by the schedule alone.
func TestKeyRotationOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	a := StartGateway(t, db, "a", GatewayOpts{Env: rotationEnv})
	b := StartGateway(t, db, "b", GatewayOpts{Env: rotationEnv})
	govMockModel(t, a, "rot-m", nil)

	// rotation fields on /key/generate are answered as LiteLLM's key row has them
	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "rot-0", "auto_rotate": true, "rotation_interval": "1h", "models": []string{"rot-m"}})
	require.Equal(t, 200, st, "%s", body)
	gen := JSON(t, body)
	require.Equal(t, true, gen["auto_rotate"])
	require.Equal(t, "1h", gen["rotation_interval"])
	require.EqualValues(t, 0, gen["rotation_count"])
	require.Nil(t, gen["last_rotation_at"])
	next, err := time.Parse(time.RFC3339Nano, gen["key_rotation_at"].(string))
	require.NoError(t, err)
	created, err := time.Parse(time.RFC3339Nano, gen["created_at"].(string))
	require.NoError(t, err)
	require.InDelta(t, float64(time.Hour), float64(next.Sub(created)), float64(time.Minute), "key_rotation_at is one rotation_interval after creation")
	oldKey, oldToken := gen["key"].(string), gen["token"].(string)

	const n = 12 // more due keys, rotated in the same runs
	old := map[string]string{"rot-0": oldToken}
	for i := 1; i < n; i++ {
		_, tok := govKey(t, a, map[string]any{"key_alias": fmt.Sprintf("rot-%d", i), "auto_rotate": true, "rotation_interval": "1h"})
		old[fmt.Sprintf("rot-%d", i)] = tok
	}
	for _, g := range []*Gateway{a, b} {
		st, _, body := govDo(t, g, oldKey, "rot-m", "hi")
		require.Equal(t, 200, st, "%s: %s", g.ReplicaID, body)
	}

	// their due time comes for all at once, on both replicas' check ticks
	PSQL(t, db, `UPDATE gateway.api_keys SET litellm_fields = litellm_fields || '{"key_rotation_at": "2001-01-01T00:00:00.000000Z"}'
		WHERE key_alias LIKE 'rot-%'`)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, "the old secret is refused on "+g.ReplicaID, func() bool {
			st, _, _ := govDo(t, g, oldKey, "rot-m", "hi")
			return st == 401
		})
	}
	Eventually(t, "every due key is rotated", func() bool {
		return agScalar[int64](t, db, "SELECT count(*) FROM gateway.api_keys WHERE key_alias LIKE 'rot-%' AND token <> ALL($1::text[])", values(old)) == n
	})
	require.EqualValues(t, n, agScalar[int64](t, db, "SELECT count(*) FROM gateway.api_keys WHERE key_alias LIKE 'rot-%'"), "one key per alias")

	for _, g := range []*Gateway{a, b} {
		byAlias := keysByAlias(t, g)
		for alias, was := range old {
			k := byAlias[alias]
			require.NotNil(t, k, "%s on %s", alias, g.ReplicaID)
			require.NotEqual(t, was, k["token"], "%s rotated", alias)
			require.EqualValues(t, 1, k["rotation_count"], "%s rotated once, not twice (%s)", alias, g.ReplicaID)
			require.Equal(t, time.Hour, rotationGap(t, k), "%s: the next rotation is one interval after this one", alias)
			require.Equal(t, true, k["auto_rotate"])
		}
		// the new token is a key LiteLLM's /key/info reads (by its hash)
		st, body := g.Do(t, "GET", "/key/info?key="+byAlias["rot-0"]["token"].(string), nil)
		require.Equal(t, 200, st, "%s", body)
		info := JSON(t, body)["info"].(map[string]any)
		require.EqualValues(t, 1, info["rotation_count"])
		require.NotNil(t, info["last_rotation_at"])
		require.Equal(t, []any{"rot-m"}, info["models"], "the settings move with the key")
		st, _ = g.Do(t, "GET", "/key/info?key="+oldToken, nil)
		require.Equal(t, 404, st, "the old token is gone on %s", g.ReplicaID)
	}
	// each old token was deleted once (the rotation's tombstone) and no new token since:
	// rotated by one replica, once
	require.EqualValues(t, n, agScalar[int64](t, db, "SELECT count(*) FROM gateway.registry_changes WHERE object_type = 'key' AND op = 'delete' AND object_id = ANY($1::text[])", values(old)))
	require.EqualValues(t, 0, agScalar[int64](t, db, `SELECT count(*) FROM gateway.registry_changes c JOIN gateway.api_keys k ON k.token = c.object_id
		WHERE c.object_type = 'key' AND c.op = 'delete' AND k.key_alias LIKE 'rot-%'`))

	// a short interval set by /key/update elapses on its own: the schedule alone rotates it
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "short"})
	require.Equal(t, 200, st, "%s", body)
	shortToken := JSON(t, body)["token"].(string)
	st, body = b.Do(t, "POST", "/key/update", map[string]any{"key": shortToken, "auto_rotate": true, "rotation_interval": "2s"})
	require.Equal(t, 200, st, "%s", body)
	require.NotNil(t, JSON(t, body)["key_rotation_at"])
	Eventually(t, "the short-interval key rotates on schedule", func() bool {
		k := keysByAlias(t, a)["short"]
		return k != nil && k["token"] != shortToken
	})
	k := keysByAlias(t, a)["short"]
	require.GreaterOrEqual(t, k["rotation_count"].(float64), 1.0)
	require.Equal(t, 2*time.Second, rotationGap(t, k))
}

// rotation_interval is a LiteLLM duration and auto_rotate a bool: anything else is a 400 naming
// the field on /key/generate and /key/update, nothing stored.
func TestKeyRotationFieldsValidated(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	a := StartGateway(t, db, "a", GatewayOpts{})
	_, token := govKey(t, a, map[string]any{"key_alias": "rv"})
	for _, c := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/key/generate", map[string]any{"key_alias": "rv-no", "auto_rotate": true, "rotation_interval": "banana"}, `rotation_interval: \"banana\" is not a duration`},
		{"/key/generate", map[string]any{"key_alias": "rv-no", "auto_rotate": true, "rotation_interval": 30}, "rotation_interval must be a duration string"},
		{"/key/generate", map[string]any{"key_alias": "rv-no", "auto_rotate": "yes", "rotation_interval": "1d"}, "auto_rotate"},
		{"/key/update", map[string]any{"key": token, "auto_rotate": true, "rotation_interval": "0d"}, "rotation_interval"},
	} {
		st, body := a.Do(t, "POST", c.path, c.body)
		require.Equal(t, 400, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want)
	}
	require.Nil(t, keysByAlias(t, a)["rv-no"])
	st, body := a.Do(t, "GET", "/key/info?key="+token, nil)
	require.Equal(t, 200, st, "%s", body)
	info := JSON(t, body)["info"].(map[string]any)
	require.Equal(t, false, info["auto_rotate"], "the refused update stored nothing")
	require.Nil(t, info["key_rotation_at"])
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
