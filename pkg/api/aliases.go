package api

// aliased maps the model name a call sends to the model group that serves it: the caller's
// team's model_aliases first, then its key's aliases, each applied once when the name is in
// it (LiteLLM litellm_pre_call_utils: _update_model_if_team_alias_exists, then
// _update_model_if_key_alias_exists, which rewrite data["model"] before routing, so access,
// limits, spend and the route all see the real group). The master key and a key without
// aliases keep the name; no allocation either way.
func (p principal) aliased(model string) string {
	if p.key == nil {
		return model
	}
	if p.team != nil {
		if m, ok := p.team.Fields.ModelAliases[model]; ok && m != "" {
			model = m
		}
	}
	if m, ok := p.key.Aliases[model]; ok && m != "" {
		model = m
	}
	return model
}
