package api

import (
	"bytes"
	"errors"
	"io"
	"lockstep/pkg/format"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/jsonscan"
)

// azureRoutes serves Azure OpenAI style client routes, so that Azure SDK clients pointed at
// the gateway work unchanged: POST /openai/deployments/{model}/chat/completions,
// /completions, /embeddings, /images/generations, /audio/speech and /audio/transcriptions
// (?api-version=… accepted and ignored). The {model} path segment is the model group; it
// replaces a JSON body's "model" (Azure clients may omit it); a multipart body keeps its own.
// The credential comes in the api-key header (or Authorization: Bearer), as for every route.
// Each request is then served by the route's ordinary handler, the same call pipeline.
// Azure's Responses API has no deployment in the path: POST /openai/responses (and the v1
// API's /openai/v1/responses) take the model group from the body's "model", as /v1/responses.
func (s *Server) azureRoutes() {
	responses := s.llm(format.FormatResponses)
	for _, path := range []string{"/openai/responses", "/openai/v1/responses"} {
		s.e.POST(path, responses, s.auth(anyKey))
	}
	for _, f := range []format.Format{format.FormatChat, format.FormatCompletions, format.FormatEmbeddings,
		format.FormatImages, format.FormatSpeech, format.FormatTranscriptions} {
		h := s.llm(f)
		s.e.POST("/openai/deployments/:model"+f.Path(), func(c echo.Context) error {
			req := c.Request()
			body, err := io.ReadAll(req.Body)
			if err != nil {
				if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
					return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
				}
				return badRequest("read body: %v", err)
			}
			if !f.Multipart() && jsonscan.Check(body) == nil && isJSONObject(body) { // else h answers the 400
				if model := c.Param("model"); gjson.GetBytes(body, "model").Str != model {
					if body, err = sjson.SetBytes(body, "model", model); err != nil {
						return badRequest("%v", err)
					}
				}
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			return h(c)
		}, s.auth(anyKey))
		s.markLongRunning("/openai/deployments/:model" + f.Path())
	}
}
