package provider

import (
	"crypto/cipher"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// DefaultAllowedEnvSecrets is general_settings.allowed_env_secrets when the config file does not
// set it: the environment variables an object stored in the database may name as
// "os.environ/NAME" (API.md "Security rules").
var DefaultAllowedEnvSecrets = []string{"*_API_KEY", "*_API_BASE"}

// gatewaySettings are the gateway's own settings, which no object stored in the database may
// read, whatever allowed_env_secrets says: its database URL (with its password) and master
// key would otherwise be sent to any api_base a database writer chooses.
var gatewaySettings = []string{"DATABASE_URL", "GATEWAY_*", "*_MASTER_KEY", "*_SALT_KEY"}

// Policy is the secrets policy of objects stored in the database and the key credentials are
// sealed with at rest, as the gateway's configuration gives them (general_settings.
// allowed_env_secrets, LITELLM_SALT_KEY / GATEWAY_SALT_KEY). Its zero value is the default:
// [DefaultAllowedEnvSecrets] and no sealing.
type Policy struct {
	// AllowedEnvSecrets are general_settings.allowed_env_secrets: glob patterns (path.Match
	// syntax: *, ?, [a-z]) of the environment variables objects stored in the database may
	// name as "os.environ/NAME"; nil means [DefaultAllowedEnvSecrets], an empty list allows
	// none. The gateway's own settings (DATABASE_URL, GATEWAY_*, *_MASTER_KEY, *_SALT_KEY)
	// are never allowed.
	AllowedEnvSecrets []string
	// SaltKey is the key credentials are sealed with (see [Builder.SealParams]); "" turns
	// sealing off (values already sealed then fail to build with [ErrSealedNoKey]).
	SaltKey string
}

// Builder builds deployments ([Builder.NewDeployment]) under one [Policy]: it is the value the
// secrets policy and the salt key travel in, from cmd to every place a row's litellm_params
// are read or sealed. Immutable once built and safe for concurrent use. A nil *Builder is the
// default policy's.
type Builder struct {
	allowed   []string
	aead      cipher.AEAD              // nil: no salt key
	providers map[string]*providerSpec // the built-in providers and the vendors
}

// defaultBuilder is the zero Policy's builder, without vendors (package-level NewDeployment;
// a nil *Builder).
var defaultBuilder = func() *Builder {
	b, err := NewBuilder(Policy{})
	if err != nil {
		panic(err)
	}
	return b
}()

// NewBuilder checks p and returns the builder of deployments under it, serving the built-in
// providers (openai, anthropic, azure and the OpenAI-compatible ones) and vendors (each a
// [Vendor], e.g. ollama.Vendor; registered here, never by themselves). Errors: a malformed
// allowed_env_secrets pattern, named ("allowed_env_secrets[1]: \"[A-\" is not a glob
// pattern: …"), a salt key that yields no cipher, a provider name given twice.
func NewBuilder(p Policy, vendors ...Vendor) (*Builder, error) {
	specs, err := withVendors(vendors)
	if err != nil {
		return nil, err
	}
	b := &Builder{allowed: DefaultAllowedEnvSecrets, providers: specs}
	if p.AllowedEnvSecrets != nil {
		for i, pat := range p.AllowedEnvSecrets {
			if _, err := path.Match(pat, ""); err != nil {
				return nil, fmt.Errorf("allowed_env_secrets[%d]: %q is not a glob pattern: %w", i, pat, err)
			}
		}
		b.allowed = slices.Clone(p.AllowedEnvSecrets)
	}
	if p.SaltKey != "" {
		aead, err := newSealAEAD(p.SaltKey)
		if err != nil {
			return nil, err
		}
		b.aead = aead
	}
	return b, nil
}

// or returns b, or the default builder when b is nil. (The policy's own methods read a nil
// b as the default policy without it: defaultBuilder's initialization reaches them.)
func (b *Builder) or() *Builder {
	if b == nil {
		return defaultBuilder
	}
	return b
}

// EnvSecretAllowed reports whether an object stored in the database may read environment
// variable name: it matches an allowed_env_secrets pattern and is not one of the gateway's own
// settings.
func (b *Builder) EnvSecretAllowed(name string) bool {
	if name == "" || matchAny(gatewaySettings, name) {
		return false
	}
	allowed := DefaultAllowedEnvSecrets // a nil b: the default policy
	if b != nil {
		allowed = b.allowed
	}
	return matchAny(allowed, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// resolveEnv reads an "os.environ/NAME" reference (LiteLLM's get_secret) in litellm_params
// field of an object stored in the database, and opens a value sealed at rest (unseal,
// SealParams); any other value is returned as is. Config-file
// objects never get here with a reference: the config loader resolves every one of them, for
// any variable. Errors name the field:
//
//	litellm_params.api_key: environment variable DATABASE_URL is not allowed for database objects
//	litellm_params.api_key: environment variable OPENAI_API_KEY is not set
func (b *Builder) resolveEnv(field, v string) (string, error) {
	if strings.HasPrefix(v, sealPrefix) {
		return b.unseal(field, v)
	}
	name, ok := strings.CutPrefix(v, "os.environ/")
	if !ok {
		return v, nil
	}
	if !b.EnvSecretAllowed(name) {
		return "", envNotAllowed(field, name)
	}
	val, set := os.LookupEnv(name)
	if !set {
		return "", fmt.Errorf("litellm_params.%s: environment variable %s is not set", field, name)
	}
	return val, nil
}

// envNotAllowed is the refusal of environment variable name for litellm_params field of a
// database object, explicit ("os.environ/NAME") or implicit (the provider's fallback).
func envNotAllowed(field, name string) error {
	return fmt.Errorf("litellm_params.%s: environment variable %s is not allowed for database objects", field, name)
}
