package itest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A key generated on A is usable on B at once (read-through); only its hash is stored; its
// models list is enforced on B.
func TestKeyGeneratedOnAUsableOnB(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "key-m1")
	agNewModel(t, p.A, "key-m2")

	st, b := p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"key-m1"}, "key_alias": "ci", "metadata": map[string]any{"team": "x"}})
	require.Equal(t, 200, st, "%s", b)
	res := JSON(t, b)
	key := res["key"].(string)
	require.True(t, strings.HasPrefix(key, "sk-"), key)
	token := keyTestHash(key)
	require.Equal(t, token, res["token"])
	require.Equal(t, []string{"key-m1"}, agStrs(res["models"]))
	require.Equal(t, "ci", res["key_alias"])
	require.Nil(t, res["expires"])

	st, b = agChat(t, p.B, key, "key-m1")
	require.Equal(t, 200, st, "%s", b)
	st, b = agChat(t, p.B, key, "key-m2")
	require.Equal(t, 401, st, "%s", b)
	typ, msg := agOpenAIError(t, b)
	require.Equal(t, "key_model_access_denied", typ)
	require.Equal(t, "key not allowed to access model. This key can only access models=['key-m1']. Tried to access key-m2", msg)
	require.Equal(t, []string{"key-m1"}, agModels(t, p.B, key))

	require.EqualValues(t, 1, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.api_keys WHERE token = $1", token))
	require.Zero(t, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.api_keys k WHERE strpos(row_to_json(k)::text, $1) > 0", key),
		"the key itself is never stored")

	// /key/info on B answers by key or by token
	for _, k := range []string{key, token} {
		st, b = p.B.Do(t, "GET", "/key/info?key="+k, nil)
		require.Equal(t, 200, st, "%s", b)
		info := JSON(t, b)["info"].(map[string]any)
		require.Equal(t, token, info["token"])
		require.Equal(t, "ci", info["key_alias"])
		require.Equal(t, false, info["blocked"])
	}

	// a key with no models list may use every model
	all := agGenKey(t, p.A)
	st, b = agChat(t, p.B, all, "key-m2")
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, []string{"key-m1", "key-m2"}, agModels(t, p.B, all))

	// unknown keys are refused on every replica
	st, _ = agChat(t, p.B, "sk-not-a-key", "key-m1")
	require.Equal(t, 401, st)
}

// Blocking, deleting and expiry take effect on every replica.
func TestKeyRevocationAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "key-r")

	t.Run("blocked", func(t *testing.T) {
		key := agGenKey(t, p.A, "key-r")
		st, b := agChat(t, p.B, key, "key-r")
		require.Equal(t, 200, st, "%s", b)
		st, b = p.A.Do(t, "POST", "/key/update", map[string]any{"key": key, "blocked": true})
		require.Equal(t, 200, st, "%s", b)
		require.Equal(t, true, JSON(t, b)["blocked"])
		st, b = agChat(t, p.A, key, "key-r")
		require.Equal(t, 401, st, "writer-local apply: A refuses at once: %s", b)
		_, msg := agOpenAIError(t, b)
		require.Equal(t, "Authentication Error, key is blocked.", msg)
		Eventually(t, "B refuses the blocked key", func() bool {
			st, _ := agChat(t, p.B, key, "key-r")
			return st == 401
		})
		// and unblocking restores it
		st, b = p.A.Do(t, "POST", "/key/update", map[string]any{"key": key, "blocked": false})
		require.Equal(t, 200, st, "%s", b)
		Eventually(t, "B accepts the unblocked key", func() bool {
			st, _ := agChat(t, p.B, key, "key-r")
			return st == 200
		})
	})

	t.Run("deleted", func(t *testing.T) {
		key := agGenKey(t, p.A, "key-r")
		st, b := agChat(t, p.B, key, "key-r")
		require.Equal(t, 200, st, "%s", b)
		st, b = p.A.Do(t, "POST", "/key/delete", map[string]any{"keys": []string{key}})
		require.Equal(t, 200, st, "%s", b)
		require.JSONEq(t, `{"deleted_keys": ["`+key+`"]}`, string(b))
		st, _ = agChat(t, p.A, key, "key-r")
		require.Equal(t, 401, st)
		Eventually(t, "B refuses the deleted key", func() bool {
			st, _ := agChat(t, p.B, key, "key-r")
			return st == 401
		})
		st, _ = p.B.Do(t, "GET", "/key/info?key="+key, nil)
		require.Equal(t, 404, st)
		// deleting an unknown key is refused and deletes nothing
		other := agGenKey(t, p.A, "key-r")
		st, b = p.A.Do(t, "POST", "/key/delete", map[string]any{"keys": []string{other, key}})
		require.Equal(t, 404, st, "%s", b)
		st, b = agChat(t, p.B, other, "key-r")
		require.Equal(t, 200, st, "%s", b)
	})

	t.Run("deleted right after generate", func(t *testing.T) {
		// B may apply the insert's notification after the delete's: version guards and
		// tombstones must never let the key come back.
		key := agGenKey(t, p.A, "key-r")
		st, b := p.A.Do(t, "POST", "/key/delete", map[string]any{"keys": []string{key}})
		require.Equal(t, 200, st, "%s", b)
		Eventually(t, "B refuses the deleted key", func() bool {
			st, _ := agChat(t, p.B, key, "key-r")
			return st == 401
		})
		for range 20 {
			st, _ = agChat(t, p.B, key, "key-r")
			require.Equal(t, 401, st)
		}
	})

	t.Run("expired", func(t *testing.T) {
		st, b := p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"key-r"}, "duration": "1s"})
		require.Equal(t, 200, st, "%s", b)
		res := JSON(t, b)
		key := res["key"].(string)
		exp, err := time.Parse(time.RFC3339Nano, res["expires"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Second), exp, 5*time.Second)
		if st, b := agChat(t, p.B, key, "key-r"); time.Now().Before(exp) {
			require.Equal(t, 200, st, "usable before expiry: %s", b)
		}
		for _, g := range []*Gateway{p.A, p.B} {
			Eventually(t, "replica "+g.ReplicaID+" refuses the expired key", func() bool {
				st, b := agChat(t, g, key, "key-r")
				if st != 401 {
					return false
				}
				_, msg := agOpenAIError(t, b)
				return strings.HasPrefix(msg, "Authentication Error, key expired at ")
			})
		}
	})
}

// Virtual keys call LLM routes only; bad input is refused with nothing stored.
func TestKeyAdminRoutesAndValidation(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "key-v")
	key := agGenKey(t, p.A)

	for _, r := range []struct{ method, path string }{
		{"GET", "/health"}, {"POST", "/model/new"}, {"POST", "/key/generate"}, {"POST", "/key/delete"},
		{"POST", "/team/new"}, {"GET", "/sync/lag"}, {"GET", "/access_group/list"},
	} {
		st, b := p.B.DoKey(t, key, r.method, r.path, map[string]any{})
		require.Equal(t, 403, st, "%s %s: %s", r.method, r.path, b)
	}
	st, b := p.B.DoKey(t, key, "GET", "/v1/models", nil)
	require.Equal(t, 200, st, "%s", b)

	count := func() int64 { return agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.api_keys") }
	n := count()
	for _, d := range []string{"soon", "10x", "-1h", "0s", "1.5h"} {
		st, b = p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"key-v"}, "duration": d})
		require.Equal(t, 400, st, "duration %q: %s", d, b)
		_, msg := agOpenAIError(t, b)
		require.Contains(t, msg, "duration", "duration %q", d)
	}
	require.Equal(t, n, count(), "a refused key is not stored")

	// a bad duration on update changes nothing
	st, b = p.A.Do(t, "POST", "/key/update", map[string]any{"key": key, "duration": "soon", "blocked": true})
	require.Equal(t, 400, st, "%s", b)
	st, b = agChat(t, p.B, key, "key-v")
	require.Equal(t, 200, st, "%s", b)
	require.False(t, agScalar[bool](t, p.DB, "SELECT blocked FROM gateway.api_keys WHERE token = $1", keyTestHash(key)))

	st, b = p.A.Do(t, "POST", "/key/update", map[string]any{"key": "sk-unknown", "blocked": true})
	require.Equal(t, 404, st, "%s", b)
}

func keyTestHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// A key widened on A is honoured on B on the very next call: a denial re-reads the key and
// the model group once (bounded read-through) before it stands.
func TestKeyWidenedOnAHonouredOnBImmediately(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"base"}})
	require.Equal(t, 200, st, "%s", b)
	key := JSON(t, b)["key"].(string)
	models := []string{"base"}
	for i := range 30 {
		name := fmt.Sprintf("wide-%d", i)
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"}})
		require.Equal(t, 200, st, "%s", b)
		models = append(models, name)
		st, b = p.A.Do(t, "POST", "/key/update", map[string]any{"key": key, "models": models})
		require.Equal(t, 200, st, "%s", b)
		st, b = p.B.DoKey(t, key, "POST", "/v1/chat/completions", chatBody(name, "x", false))
		require.Equal(t, 200, st, "round %d: %s", i, b)
	}
	// and a model outside the list stays denied with the exact text
	st, b = p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "outside", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"}})
	require.Equal(t, 200, st, "%s", b)
	st, b = p.B.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("outside", "x", false))
	require.Equal(t, 401, st)
	require.Contains(t, string(b), "key not allowed to access model. This key can only access models=['base', 'wide-0'")
	require.Contains(t, string(b), "Tried to access outside")
	require.Contains(t, string(b), `"type":"key_model_access_denied"`)
}
