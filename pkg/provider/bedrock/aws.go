package bedrock

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"lockstep/pkg/provider"
)

// awsBase checks the implicit credential chain (bs.chain: a database object may use it only
// when allowed_env_secrets allows AWS_SECRET_ACCESS_KEY) and returns the endpoint base of an
// AWS runtime host ("bedrock-runtime", "runtime.sagemaker"): the explicit one (endpoint, else
// api_base), else https://<host>.<region>.amazonaws.com. Without a region it is resolved at
// call time (LiteLLM's BaseAWSLLM._get_aws_region_name; bs.lazyRegion), and with no explicit
// base the signer sends to that region's host (bs.regionHost).
func awsBase(s *provider.Setup, bs *bedrockSigner, region, profile, endpoint, host string) (string, error) {
	d := s.Deployment()
	if bs.chain != nil && d.MockResponse == nil {
		if err := s.ImplicitChain("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"); err != nil {
			return "", fmt.Errorf("%w (without aws_access_key_id and aws_secret_access_key the AWS default credential chain would be used)", err)
		}
	}
	base := endpoint
	if base == "" {
		base = d.APIBase
	}
	if region == "" {
		bs.lazyRegion = provider.NewLazy(func() (string, error) { return callRegion(profile), nil })
		if base == "" {
			bs.regionHost = true
			base = "https://" + host + ".amazonaws.com"
		}
	}
	if base == "" {
		base = "https://" + host + "." + region + ".amazonaws.com"
	}
	return base, nil
}

// awsSigner reads the AWS litellm_params LiteLLM's bedrock and sagemaker providers share
// (BaseAWSLLM): aws_region_name (env AWS_REGION, else AWS_DEFAULT_REGION; "" when none),
// aws_access_key_id + aws_secret_access_key (+ aws_session_token), else the AWS SDK's default
// chain (aws_profile_name), and returns the SigV4 signer. Errors name the field and provider.
func awsSigner(s *provider.Setup, name string) (bs *bedrockSigner, region, profile string, err error) {
	get := s.ParamOrEnv
	if region, err = get("aws_region_name", "AWS_REGION"); err != nil {
		return nil, "", "", err
	}
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region != "" && !validRegion(region) {
		// the region becomes part of the endpoint's host: "evil.com#" would send the signed
		// request to bedrock-runtime.evil.com
		return nil, "", "", fmt.Errorf("litellm_params.aws_region_name: %q is not an AWS region (like us-east-1) for provider %q", region, name)
	}
	keyID, err := get("aws_access_key_id", "")
	if err != nil {
		return nil, "", "", err
	}
	secret, err := get("aws_secret_access_key", "")
	if err != nil {
		return nil, "", "", err
	}
	session, err := get("aws_session_token", "")
	if err != nil {
		return nil, "", "", err
	}
	if profile, err = get("aws_profile_name", ""); err != nil {
		return nil, "", "", err
	}
	if (keyID == "") != (secret == "") {
		return nil, "", "", fmt.Errorf("litellm_params.aws_access_key_id and aws_secret_access_key must be given together for provider %q", name)
	}
	bs = &bedrockSigner{signer: v4.NewSigner(), region: region}
	if keyID != "" {
		bs.creds = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(keyID, secret, session))
		s.AddSecrets(secret, session)
		return bs, region, profile, nil
	}
	bs.chain = provider.NewLazy(func() (aws.CredentialsProvider, error) {
		opts := []func(*config.LoadOptions) error{}
		if profile != "" {
			opts = append(opts, config.WithSharedConfigProfile(profile))
		}
		cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
		if err != nil {
			return nil, err
		}
		if cfg.Credentials == nil {
			return nil, errors.New("no credential provider in the AWS configuration")
		}
		return cfg.Credentials, nil
	})
	return bs, region, profile, nil
}

// validRegion reports whether region can be an AWS region name (us-east-1, us-gov-west-1,
// cn-north-1): 1 to 32 lowercase letters, digits and "-", starting with a letter — the only
// characters AWS region names use, so it is one DNS label of the endpoint's host.
func validRegion(region string) bool {
	if len(region) > 32 || region[0] < 'a' || region[0] > 'z' {
		return false
	}
	for _, c := range []byte(region) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// callRegion is the AWS region of a deployment configured without one, found when it is first
// called, in LiteLLM's order (BaseAWSLLM._get_aws_region_name): AWS_REGION_NAME, AWS_REGION,
// AWS_DEFAULT_REGION, the region of the AWS shared config (profile aws_profile_name, else
// AWS_PROFILE or default), else us-west-2.
func callRegion(profile string) string {
	for _, env := range []string{"AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	opts := []func(*config.LoadOptions) error{}
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if cfg, err := config.LoadDefaultConfig(context.Background(), opts...); err == nil && cfg.Region != "" {
		return cfg.Region
	}
	return "us-west-2"
}
