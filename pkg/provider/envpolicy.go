package provider

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
)

// DefaultAllowedEnvSecrets is general_settings.allowed_env_secrets when the config file does not
// set it: the environment variables an object stored in the database may name as
// "os.environ/NAME" (API.md "Security rules").
var DefaultAllowedEnvSecrets = []string{"*_API_KEY", "*_API_BASE"}

// gatewaySettings are the gateway's own settings, which no object stored in the database may
// read, whatever allowed_env_secrets says: its database URL (with its password) and master
// key would otherwise be sent to any api_base a database writer chooses.
var gatewaySettings = []string{"DATABASE_URL", "GATEWAY_*", "*_MASTER_KEY", "*_SALT_KEY"}

// allowedEnvSecrets holds the patterns in force (SetAllowedEnvSecrets).
var allowedEnvSecrets atomic.Pointer[[]string]

func init() { allowedEnvSecrets.Store(&DefaultAllowedEnvSecrets) }

// SetAllowedEnvSecrets sets general_settings.allowed_env_secrets: glob patterns (path.Match
// syntax: *, ?, [a-z]) of the environment variables objects stored in the database may name
// as "os.environ/NAME"; nil restores [DefaultAllowedEnvSecrets], an empty list allows none.
// The gateway's own settings (DATABASE_URL, GATEWAY_*, *_MASTER_KEY, *_SALT_KEY) are never
// allowed.
// Set once at startup, before any deployment is built. Errors: a malformed pattern, named.
func SetAllowedEnvSecrets(patterns []string) error {
	if patterns == nil {
		allowedEnvSecrets.Store(&DefaultAllowedEnvSecrets)
		return nil
	}
	for i, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("allowed_env_secrets[%d]: %q is not a glob pattern: %w", i, p, err)
		}
	}
	cp := slices.Clone(patterns)
	allowedEnvSecrets.Store(&cp)
	return nil
}

// EnvSecretAllowed reports whether an object stored in the database may read environment
// variable name: it matches an allowed_env_secrets pattern and is not one of the gateway's own
// settings.
func EnvSecretAllowed(name string) bool {
	if name == "" || matchAny(gatewaySettings, name) {
		return false
	}
	return matchAny(*allowedEnvSecrets.Load(), name)
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
func resolveEnv(field, v string) (string, error) {
	if strings.HasPrefix(v, sealPrefix) {
		return unseal(field, v)
	}
	name, ok := strings.CutPrefix(v, "os.environ/")
	if !ok {
		return v, nil
	}
	if !EnvSecretAllowed(name) {
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
