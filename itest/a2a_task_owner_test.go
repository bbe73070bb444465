package itest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// a2aStream starts message/stream on g with key and returns the task id from the first event
// and a channel that receives the state of the final event when the stream ends.
func a2aStream(t *testing.T, g *Gateway, key, agent string) (taskID string, final <-chan string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "message/stream",
		"params": map[string]any{"message": map[string]any{
			"kind": "message", "role": "user", "messageId": uuid.NewString(),
			"parts": []any{map[string]any{"kind": "text", "text": "secret question of B"}},
		}},
	})
	require.NoError(t, err)
	req, err := http.NewRequest("POST", g.URL+"/a2a/"+agent, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() string {
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return d
			}
		}
		return ""
	}
	first := next()
	taskID = gjson.Get(first, "result.id").String()
	require.NotEmpty(t, taskID, "first event: %s", first)
	require.Equal(t, "task", gjson.Get(first, "result.kind").String(), "first event: %s", first)
	done := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		last := ""
		for ev := next(); ev != ""; ev = next() {
			last = ev
		}
		done <- gjson.Get(last, "result.status.state").String()
	}()
	return taskID, done
}

func taskRPC(method, id string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": map[string]any{"id": id}}
}

// TestA2ATaskBelongsToItsCreator (issue 17, item 6): key B streams to an agent (slowly, so the
// task is still working); key A, which may not use the agent's model, asks tasks/get and
// tasks/cancel for B's task on both replicas and gets exactly what a nonexistent id gets (the
// same HTTP status and body, byte for byte once the id is swapped), and B's stream is not
// canceled. B itself, a key of B's team, and the master key read the task on both replicas.
func TestA2ATaskBelongsToItsCreator(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{}, fakeupstream.WithStreamChunks(40), fakeupstream.WithChunkDelay(50*time.Millisecond))
	agent := createAgent(t, b.A, "owned-agent", map[string]any{"model": "m"})
	st, body := b.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name": "other", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
	})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "task-team"})
	require.Equal(t, 200, st, "%s", body)
	keyB, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}, "team_id": "task-team"})
	keyTeammate, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}, "team_id": "task-team"})
	keyA, _ := govKey(t, b.A, map[string]any{"models": []string{"other"}})
	keyOtherTeamOnM, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}})

	taskID, final := a2aStream(t, b.A, keyB, agent)
	missing := uuid.NewString()
	probe := func(when string) {
		for _, g := range []*Gateway{b.A, b.B} {
			for _, key := range []string{keyA, keyOtherTeamOnM} {
				for _, method := range []string{"tasks/get", "tasks/cancel"} {
					stOwned, owned := g.DoKey(t, key, "POST", "/a2a/"+agent, taskRPC(method, taskID))
					stMissing, none := g.DoKey(t, key, "POST", "/a2a/"+agent, taskRPC(method, missing))
					require.Equal(t, stMissing, stOwned, "%s on %s (%s)", method, g.URL, when)
					require.Equal(t, string(none), strings.ReplaceAll(string(owned), taskID, missing),
						"%s on %s (%s): another key's task answers as a nonexistent one", method, g.URL, when)
					require.Equal(t, int64(-32001), gjson.GetBytes(owned, "error.code").Int(), "%s", owned)
					require.NotContains(t, string(owned), "secret question", "%s", owned)
				}
			}
		}
	}
	probe("task working")
	require.Equal(t, "completed", <-final, "B's stream was not canceled by another key")
	probe("task completed") // the owner would get -32002 "not cancelable" here

	for _, g := range []*Gateway{b.A, b.B} {
		for name, key := range map[string]string{"creator": keyB, "teammate": keyTeammate, "master key": MasterKey} {
			st, body := g.DoKey(t, key, "POST", "/a2a/"+agent, taskRPC("tasks/get", taskID))
			require.Equal(t, 200, st, "%s", body)
			require.Equal(t, "completed", gjson.GetBytes(body, "result.status.state").String(), "%s on %s: %s", name, g.URL, body)
			require.Equal(t, "secret question of B", gjson.GetBytes(body, "result.history.0.parts.0.text").String(), "%s", body)
			// the owner's cancel of a finished task is "not cancelable", which others never see
			st, body = g.DoKey(t, key, "POST", "/a2a/"+agent, taskRPC("tasks/cancel", taskID))
			require.Equal(t, 200, st, "%s", body)
			require.Equal(t, int64(-32002), gjson.GetBytes(body, "error.code").Int(), "%s on %s: %s", name, g.URL, body)
		}
	}

	// a teammate may cancel a running task of its team, on the other replica
	taskID, final = a2aStream(t, b.A, keyB, agent)
	st, body = b.B.DoKey(t, keyTeammate, "POST", "/a2a/"+agent, taskRPC("tasks/cancel", taskID))
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "canceled", gjson.GetBytes(body, "result.status.state").String(), "%s", body)
	require.Equal(t, "canceled", <-final)
}
