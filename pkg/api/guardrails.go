package api

func (s *Server) guardrailRoutes() {}
