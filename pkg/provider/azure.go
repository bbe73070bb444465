package provider

import (
	"lockstep/pkg/format"

	"errors"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// DefaultAzureAPIVersion is the api-version sent to Azure OpenAI when neither
// litellm_params.api_version nor AZURE_API_VERSION is set (the latest GA data-plane version,
// https://learn.microsoft.com/azure/ai-services/openai/reference).
const DefaultAzureAPIVersion = "2024-10-21"

// DefaultAzureResponsesAPIVersion is the api-version of Azure's Responses API when none is
// configured: "preview", on the v1 path (LiteLLM's AZURE_DEFAULT_RESPONSES_API_VERSION).
const DefaultAzureResponsesAPIVersion = "preview"

// azureResponsesURL is the Azure OpenAI Responses API endpoint of a resource, as LiteLLM builds
// it (litellm/llms/azure/responses/transformation.py, BaseAzureLLM._get_base_azure_url):
// {base}/openai/responses?api-version={version}, on the v1 path
// ({base}/openai/v1/responses?api-version={version}) for "preview" and "latest"; "v1" is the
// GA v1 API, which takes no api-version. The deployment goes in the body's "model", not in
// the path.
func azureResponsesURL(base, version string) string {
	switch version {
	case "v1":
		return base + "/openai/v1/responses"
	case "preview", "latest":
		return base + "/openai/v1/responses?api-version=" + version
	}
	return base + "/openai/responses?api-version=" + url.QueryEscape(version)
}

// setupAzure finishes an azure/<deployment> deployment (LiteLLM's azure provider): the model
// after "azure/" is the Azure deployment name, each route is
// {api_base}/openai/deployments/{deployment}/{route}?api-version={api_version}, and the key goes
// in the api-key header, or litellm_params.azure_ad_token (env AZURE_AD_TOKEN; for a database
// object only when allowed_env_secrets allows it, see implicitEnv) as "Authorization: Bearer". Azure serves chat, embeddings, completions, images and audio, and
// the Responses API natively (azureResponsesURL; api_version, else "preview"); messages are
// translated to chat; moderations are not served (400).
func setupAzure(d *Deployment, p gjson.Result) error {
	var err error
	if d.APIVersion, err = d.paramOrEnv(p, "api_version", "AZURE_API_VERSION"); err != nil {
		return err
	}
	responsesVersion := d.APIVersion
	if responsesVersion == "" {
		responsesVersion = DefaultAzureResponsesAPIVersion
	}
	if d.APIVersion == "" {
		d.APIVersion = DefaultAzureAPIVersion
	}
	adToken, err := d.paramStr(p, "azure_ad_token")
	if err != nil {
		return err
	}
	// AZURE_AD_TOKEN is read when the field is absent; for a database object only when
	// no api_key is given either (an explicit key is not replaced by an implicit token) and
	// the secrets policy allows it.
	if adToken == "" && d.MockResponse == nil && (d.config || d.APIKey == "") {
		if adToken, err = d.implicitEnv("azure_ad_token", "AZURE_AD_TOKEN"); err != nil {
			return err
		}
	}
	adToken = strings.TrimPrefix(adToken, "Bearer ")
	if d.APIKey == "" && adToken == "" && d.MockResponse == nil {
		return errors.New("litellm_params.api_key (or azure_ad_token, or AZURE_API_KEY) is required for provider \"azure\"")
	}
	base := strings.TrimSuffix(d.APIBase, "/openai")
	prefix := base + "/openai/deployments/" + url.PathEscape(d.Model)
	q := "?api-version=" + url.QueryEscape(d.APIVersion)
	d.urls = [format.NumFormats]string{}
	for _, f := range []format.Format{format.FormatChat, format.FormatEmbeddings, format.FormatCompletions, format.FormatImages, format.FormatSpeech, format.FormatTranscriptions} {
		d.urls[f] = prefix + f.Path() + q
	}
	d.urls[format.FormatResponses] = azureResponsesURL(base, responsesVersion)
	spec := *d.spec // the provider's spec is shared: this deployment's own copy
	spec.responses = true
	d.spec = &spec
	h := d.header.Clone()
	h.Del("Authorization")
	h.Del("OpenAI-Organization")
	if adToken != "" {
		h.Set("Authorization", "Bearer "+adToken)
		d.extraSecrets = append(d.extraSecrets, adToken)
	} else {
		h.Set("api-key", d.APIKey)
	}
	for k, v := range d.ExtraHeaders {
		h.Set(k, v)
	}
	d.header = h
	return nil
}
