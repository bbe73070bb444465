package api

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	pipeline "lockstep/pkg/call"
)

// errBatchStream refuses a streamed batch completion.
const errBatchStream = "stream: a comma-separated model (batch completion) is answered as a list and cannot be streamed"

// maxBatchModels bounds the names of one batch completion: each is a concurrent call through
// the whole pipeline (and upstream), so an unbounded list would let one request of a few
// hundred KB fan out into that many upstream calls (LiteLLM sets no bound). More → 400
// `model: a batch completion names at most 64 models, got <n>`.
const maxBatchModels = 64

// batchCompletion serves a /chat/completions request whose model is a comma-separated list of
// model names: LiteLLM's batch completion across models (litellm/proxy/route_llm_request.py:
// a "," in an acompletion's model → Router.abatch_completion, or with "fastest_response":
// true Router.abatch_completion_fastest_response), checked before the model is looked up.
// Each name (trimmed) is called at once, concurrently, as a request naming only it would be:
// the whole call pipeline (model access, limits, budgets, guardrails, routing, fallbacks,
// spend) runs for each. The answer is 200 with a JSON list in the order of the names: each
// element that model's chat completion, or its error in the OpenAI envelope ({"error":
// {...}}; LiteLLM returns the exception in its place). With fastest_response true the answer
// is the first successful completion alone (with its headers), the other calls are
// cancelled; when every call fails, the first name's error is the answer. fastest_response is
// not sent upstream; a non-boolean one is a 400. A streamed batch is a 400 (errBatchStream),
// as is one naming more than maxBatchModels models.
func (s *Server) batchCompletion(ctx context.Context, c echo.Context, spec pipeline.Spec) error {
	if spec.Stream {
		return badRequest(errBatchStream)
	}
	body := spec.Body
	fastest := gjson.GetBytes(body, "fastest_response")
	if fastest.Exists() {
		if fastest.Type != gjson.True && fastest.Type != gjson.False {
			return badRequest("fastest_response: must be a boolean, got %s", fastest.Raw)
		}
		var err error
		if body, err = sjson.DeleteBytes(body, "fastest_response"); err != nil {
			return badRequest("%v", err)
		}
	}
	if n := strings.Count(spec.Model, ",") + 1; n > maxBatchModels {
		return badRequest("model: a batch completion names at most %d models, got %d", maxBatchModels, n)
	}
	names := strings.Split(spec.Model, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]*batchResponse, len(names))
	done := make(chan int, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.batchOne(bctx, c, spec, body, name)
			done <- i
		}()
	}
	if fastest.Type == gjson.True {
		for range names {
			if i := <-done; results[i].status < 300 {
				cancel()
				wg.Wait()
				return results[i].writeTo(c)
			}
		}
		return results[0].writeTo(c)
	}
	wg.Wait()
	var out bytes.Buffer
	out.WriteByte('[')
	for i, r := range results {
		if i > 0 {
			out.WriteByte(',')
		}
		if b := bytes.TrimSpace(r.body.Bytes()); len(b) > 0 {
			out.Write(b)
		} else {
			out.WriteString("null") // nothing was answered (the client went away)
		}
	}
	out.WriteByte(']')
	return c.JSONBlob(http.StatusOK, out.Bytes())
}

// batchOne runs the call of one model of a batch completion into a buffer: the answer, or the
// error as the error handler renders it for the route.
func (s *Server) batchOne(ctx context.Context, c echo.Context, spec pipeline.Spec, body []byte, model string) *batchResponse {
	rec := &batchResponse{header: http.Header{}}
	cc := s.e.NewContext(c.Request().WithContext(ctx), rec)
	cc.SetPath(c.Path())
	cc.Set(principalKey, c.Get(principalKey))
	err := func() error {
		if model == "" {
			return invalidModel(spec.Format, "")
		}
		b, err := sjson.SetBytes(body, "model", model)
		if err != nil {
			return badRequest("%v", err)
		}
		sp := spec
		sp.Model, sp.Body, sp.Header = model, b, cc.Response().Header()
		if strings.HasPrefix(model, pipeline.AgentModelPrefix) {
			if err := s.pipe.AgentModel(ctx, &sp); err != nil {
				return err
			}
		}
		rf := pipeline.Scan(b)
		failed, err := s.pipe.Serve(ctx, sp, &rf, func(ctx context.Context, call *pipeline.Call) error {
			return s.answer(ctx, cc, call)
		})
		if failed != nil && !cc.Response().Committed {
			failed.SetHeaders(cc.Response().Header(), nil)
		}
		return err
	}()
	if err != nil {
		s.errorHandler(err, cc)
	}
	return rec
}

// batchResponse is an http.ResponseWriter keeping one call's answer of a batch completion.
type batchResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *batchResponse) Header() http.Header { return b.header }

func (b *batchResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *batchResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *batchResponse) Flush() {}

// writeTo answers with the kept answer: its headers, status and body.
func (b *batchResponse) writeTo(c echo.Context) error {
	h := c.Response().Header()
	for k, v := range b.header {
		h[k] = v
	}
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(b.body.Bytes())
	return err
}
