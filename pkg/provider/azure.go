package provider

import (
	"errors"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// DefaultAzureAPIVersion is the api-version sent to Azure OpenAI when neither
// litellm_params.api_version nor AZURE_API_VERSION is set (the latest GA data-plane version,
// https://learn.microsoft.com/azure/ai-services/openai/reference).
const DefaultAzureAPIVersion = "2024-10-21"

// setupAzure finishes an azure/<deployment> deployment (LiteLLM's azure provider): the model
// after "azure/" is the Azure deployment name, each route is
// {api_base}/openai/deployments/{deployment}/{route}?api-version={api_version}, and the key goes
// in the api-key header, or litellm_params.azure_ad_token (env AZURE_AD_TOKEN) as
// "Authorization: Bearer". Azure serves chat, embeddings, completions, images and audio;
// responses and messages are translated to chat; moderations are not served (400).
func setupAzure(d *Deployment, p gjson.Result) error {
	var err error
	if d.APIVersion, err = paramOrEnv(p, "api_version", "AZURE_API_VERSION"); err != nil {
		return err
	}
	if d.APIVersion == "" {
		d.APIVersion = DefaultAzureAPIVersion
	}
	adToken, err := paramOrEnv(p, "azure_ad_token", "AZURE_AD_TOKEN")
	if err != nil {
		return err
	}
	adToken = strings.TrimPrefix(adToken, "Bearer ")
	if d.APIKey == "" && adToken == "" && d.MockResponse == nil {
		return errors.New("litellm_params.api_key (or azure_ad_token, or AZURE_API_KEY) is required for provider \"azure\"")
	}
	base := strings.TrimSuffix(d.APIBase, "/openai")
	prefix := base + "/openai/deployments/" + url.PathEscape(d.Model)
	q := "?api-version=" + url.QueryEscape(d.APIVersion)
	d.urls = [numFormats]string{}
	for _, f := range []Format{FormatChat, FormatEmbeddings, FormatCompletions, FormatImages, FormatSpeech, FormatTranscriptions} {
		d.urls[f] = prefix + f.Path() + q
	}
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
