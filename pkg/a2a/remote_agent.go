package a2a

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// RemoteProvider is the provider of an agent that is a remote A2A agent proxied by the
// gateway (LiteLLM's A2A agent gateway logs such calls as model "a2a_agent/<name>", provider
// "a2a_agent"): litellm_params.model "a2a_agent/<name>" or custom_llm_provider "a2a_agent".
// The remote's JSON-RPC URL is litellm_params.api_base, else the registered card's (see
// [PinnedInterface]); it is called by the provider of that name (pkg/a2a/remote).
const RemoteProvider = "a2a_agent"

// RemoteVersionParam is the litellm_params member [Agent.UpstreamParams] sets to the A2A
// version the remote is called in: "0.3" or "1.0".
const RemoteVersionParam = "a2a_protocol_version"

// Remote reports whether the agent is a remote A2A agent (see [RemoteProvider]).
func (a *Agent) Remote() bool {
	return a.CustomLLMProvider == RemoteProvider || strings.HasPrefix(a.Model, RemoteProvider+"/")
}

// PinnedInterface reads the JSON-RPC interface an A2A agent card pins, the one its remote is
// called at: the first supportedInterfaces entry (A2A 1.0 §5.5: in order of preference) whose
// protocolBinding is JSONRPC, with that entry's url and protocolVersion; otherwise (a 0.3
// card) the card's url and protocolVersion (absent: "0.3"). version is "1.0" for any 1.x,
// else "0.3".
func PinnedInterface(card []byte) (url, version string) {
	c := gjson.ParseBytes(card)
	url, version = c.Get("url").Str, c.Get("protocolVersion").Str
	c.Get("supportedInterfaces").ForEach(func(_, it gjson.Result) bool {
		if strings.EqualFold(it.Get("protocolBinding").Str, "JSONRPC") {
			url, version = it.Get("url").Str, it.Get("protocolVersion").Str
			return false
		}
		return true
	})
	if strings.HasPrefix(version, "1.") || version == "1" {
		return url, "1.0"
	}
	return url, "0.3"
}

// UpstreamParams are the litellm_params the agent's ad-hoc deployment is built from: its own,
// and for a remote agent with "model": "a2a_agent/<…>", api_base defaulting to the pinned
// interface's url and [RemoteVersionParam] set to its version.
func (a *Agent) UpstreamParams() json.RawMessage {
	if !a.Remote() {
		return a.LitellmParams
	}
	url, version := PinnedInterface(a.Card)
	p := []byte(a.LitellmParams)
	var err error
	if !strings.HasPrefix(a.Model, RemoteProvider+"/") {
		p, err = sjson.SetBytes(p, "model", RemoteProvider+"/"+a.Model)
	}
	if err == nil && gjson.GetBytes(p, "api_base").Str == "" && url != "" {
		p, err = sjson.SetBytes(p, "api_base", url)
	}
	if err == nil {
		p, err = sjson.SetBytes(p, RemoteVersionParam, version)
	}
	if err != nil {
		return a.LitellmParams // a params object NewAgent accepted always takes these edits
	}
	return p
}
