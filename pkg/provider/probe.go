package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// Probe is a cheap health check of one deployment, for GET /health (LiteLLM's
// healthy_endpoints / unhealthy_endpoints): it spends no tokens.
//
//   - mock deployments (litellm_params.mock_response) answer without a call: healthy, unless
//     the mock is one of LiteLLM's error mocks (then the error it would raise);
//   - OpenAI-compatible and Anthropic deployments: GET {api_base}/models with the deployment's
//     credentials (both APIs list models there); a 2xx answer is healthy, anything else is the
//     upstream's error;
//   - other providers (their own APIs): GET {api_base}; healthy when the host answers with a
//     status below 500 other than 401 and 403 (reachable, credentials not refused).
//
// ctx bounds the probe. Redirects are not followed (a 3xx is unhealthy, see roundTrip). The
// error names the cause (status and message, or the transport error), with the deployment's
// secrets and the credentials the probe sent (a signer's token) redacted.
func (c *Client) Probe(ctx context.Context, d *Deployment) error {
	if d.IsMock() {
		return mockError(d)
	}
	req, err := d.modelsRequest(ctx)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errors.New("probe timed out")
		}
		return d.redactAny(err)
	}
	defer resp.Body.Close()
	if d.spec.wire != wireOpenAI && d.spec.wire != wireAnthropic {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
			(resp.StatusCode >= 300 && resp.StatusCode <= 399) {
			return fmt.Errorf("upstream answered %d", resp.StatusCode)
		}
		return nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ue := errorFromResponse(resp)
		return d.redactAny(fmt.Errorf("upstream answered %d: %s", ue.Status, d.redactSent(req, ue.Message)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return nil
}

// modelsRequest is the signed GET of the deployment's model list (OpenAI-compatible and
// Anthropic: {api_base}/models, azure's /openai/models, Anthropic's /v1/models), or of its
// api_base for the other providers (their own APIs list no models there).
func (d *Deployment) modelsRequest(ctx context.Context) (*http.Request, error) {
	var url string
	switch d.spec.wire {
	case wireOpenAI:
		url = d.APIBase + "/models"
		if d.Provider == "azure" {
			url = strings.TrimSuffix(d.APIBase, "/openai") + "/openai/models?api-version=" + d.APIVersion
		}
	case wireAnthropic:
		base := strings.TrimSuffix(strings.TrimSuffix(d.APIBase, "/messages"), "/v1")
		url = base + "/v1/models"
	default:
		url = d.APIBase
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build probe request: %w", err)
	}
	req.Header = d.headers().Clone()
	req.Header.Del("Content-Type")
	if d.signer != nil {
		if err := d.signer.Sign(ctx, req, nil); err != nil {
			return nil, d.redactAny(err)
		}
	}
	return req, nil
}

// ErrNoModelList: the deployment's provider has no model list lockstep can read (its own API).
var ErrNoModelList = errors.New("the provider lists no models")

// ListModels returns the model ids an OpenAI-compatible or Anthropic deployment's upstream
// lists (GET /models: data[].id, in its order; Anthropic pages with has_more/last_id are read
// up to 10 pages), with the deployment's credentials; ErrNoModelList for other providers and
// mock deployments.
// Errors name the status and message, secrets redacted (as Probe's).
func (c *Client) ListModels(ctx context.Context, d *Deployment) ([]string, error) {
	if d.IsMock() || (d.spec.wire != wireOpenAI && d.spec.wire != wireAnthropic) {
		return nil, ErrNoModelList
	}
	var ids []string
	after := ""
	for page := 0; page < 10; page++ {
		req, err := d.modelsRequest(ctx)
		if err != nil {
			return nil, err
		}
		if after != "" {
			q := req.URL.Query()
			q.Set("after_id", after)
			req.URL.RawQuery = q.Encode()
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, d.redactAny(err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			ue := errorFromResponse(resp)
			resp.Body.Close()
			return nil, d.redactAny(fmt.Errorf("upstream answered %d: %s", ue.Status, d.redactSent(req, ue.Message)))
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			return nil, d.redactAny(err)
		}
		j := gjson.ParseBytes(raw)
		j.Get("data.#.id").ForEach(func(_, v gjson.Result) bool {
			if v.Str != "" {
				ids = append(ids, v.Str)
			}
			return true
		})
		if !j.Get("has_more").Bool() || j.Get("last_id").Str == "" {
			break
		}
		after = j.Get("last_id").Str
	}
	return ids, nil
}
