package api

func (s *Server) accessGroupRoutes() {}
