package api

import (
	"context"

	"lockstep/pkg/a2a"
)

func (s *Server) agentRoutes() {}

type agentResolver struct{ s *Server }

func (r agentResolver) ResolveAgent(ctx context.Context, idOrName string) (*a2a.Agent, error) {
	return nil, a2a.ErrAgentNotFound
}

type agentCompleter struct{ s *Server }

func (agentCompleter) Complete(ctx context.Context, agent *a2a.Agent, text string) (string, error) {
	return "", nil
}
func (agentCompleter) Stream(ctx context.Context, agent *a2a.Agent, text string, onDelta func(string) error) error {
	return nil
}
