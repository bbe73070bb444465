package notify

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// payloadSeeds are gateway_registry payloads as sql/001 writes them and variations of every
// kind the fast path hands to encoding/json.
var payloadSeeds = []string{
	`{"seq" : 12, "type" : "model", "op" : "insert", "id" : "prop-0-1", "v" : 34, "ts" : 1764633600123456}`,
	`{"seq":1,"type":"key","op":"delete","id":"sk-x","v":2,"ts":3}`,
	`{"seq" : 9, "type" : "model", "op" : "truncate", "id" : "", "v" : 10, "ts" : 0}`,
	` {"seq":1,"type":"team","op":"update","id":"t","v":2,"ts":3} `,
	`{"seq":1,"type":"team","op":"update","id":"a\"b","v":2,"ts":3}`,
	`{"seq":1,"type":"team","op":"update","id":"caf\u00e9","v":2,"ts":3}`,
	"{\"seq\":1,\"type\":\"team\",\"op\":\"update\",\"id\":\"café\",\"v\":2,\"ts\":3}",
	"{\"seq\":1,\"type\":\"team\",\"op\":\"update\",\"id\":\"\xff\",\"v\":2,\"ts\":3}",
	`{"seq":1,"Type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1,"seq":2,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1,"type":"team","op":"update","id":"t","v":2,"ts":3,"extra":[1,{"a":null}]}`,
	`{"seq":null,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1.5,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1e3,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":-1,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":01,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":99999999999999999999,"type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":"1","type":"team","op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1,"type":7,"op":"update","id":"t","v":2,"ts":3}`,
	`{"seq":1,"type":"team","op":"update","id":"t","v":2,"ts":3}x`,
	`{"seq":1,"type":"team","op":"update","id":"t","v":2,"ts":3,}`,
	`{"seq":1 "type":"team"}`,
	`{"seq":1,"type":"team"`,
	`{}`, `[]`, ``, `{`, `null`, `{"id":"x"}`,
}

// TestParseEventAsEncodingJSON: for every payload, parseEvent decodes exactly what
// json.Unmarshal decodes, and fails exactly when it fails.
func TestParseEventAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, p := range payloadSeeds {
		checkParseEvent(t, p)
	}
}

// TestParseEventFastPath: the payloads sql/001 writes are read by the fast path, without
// allocating (not parallel: testing.AllocsPerRun refuses to run in a parallel test).
func TestParseEventFastPath(t *testing.T) {
	p := payloadSeeds[0]
	var ev event
	require.True(t, scanEvent(p, &ev))
	require.Equal(t, event{Seq: 12, Type: "model", Op: "insert", ID: "prop-0-1", V: 34, TS: 1764633600123456}, ev)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = parseEvent(p, &ev) }))
}

func FuzzParseEvent(f *testing.F) {
	for _, p := range payloadSeeds {
		f.Add(p)
	}
	f.Fuzz(checkParseEvent)
}

func checkParseEvent(t *testing.T, p string) {
	var got, want event
	gerr := parseEvent(p, &got)
	werr := json.Unmarshal([]byte(p), &want)
	require.Equal(t, werr == nil, gerr == nil, "payload %q: error %v, encoding/json's %v", p, gerr, werr)
	if werr == nil {
		require.Equal(t, want, got, "payload %q", p)
	}
}
