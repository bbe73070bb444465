package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
		return fmt.Errorf("build probe request: %w", err)
	}
	req.Header = d.header.Clone()
	req.Header.Del("Content-Type")
	if d.signer != nil {
		if err := d.signer.Sign(ctx, req, nil); err != nil {
			return d.redactAny(err)
		}
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
