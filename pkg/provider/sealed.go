package provider

import (
	"lockstep/pkg/format"

	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// Credentials at rest (API.md "Security rules"; LiteLLM encrypts litellm_params with
// LITELLM_SALT_KEY in its encrypt_value_helper). With a salt key set (Policy.SaltKey, from
// LITELLM_SALT_KEY or GATEWAY_SALT_KEY), the credential fields of a litellm_params written
// through the API are stored sealed:
//
//   - cipher: AES-256-GCM (crypto/aes, crypto/cipher), a random 96-bit nonce per value, the
//     field's path ("api_key", "extra_headers.Cookie") as additional data, so a sealed value
//     moved to another field does not open;
//   - key: HKDF-SHA256 (RFC 5869; crypto/hkdf) of the salt key's bytes, no salt, info
//     "lockstep litellm_params v1", 32 bytes;
//   - stored form: the JSON string sealPrefix + base64url (RFC 4648 §5, no padding) of
//     nonce ‖ ciphertext ‖ 16-byte tag, e.g. "lockstep:aes-256-gcm:v1:Qm9n…".
//
// A value without the prefix is clear text and is used as is (rows written by psql, or
// before the key was set). "os.environ/NAME" references are not secrets and stay clear.

// sealPrefix marks a sealed litellm_params value.
const sealPrefix = "lockstep:aes-256-gcm:v1:"

// SealedFields are the top-level litellm_params members sealed at rest (LiteLLM's provider
// credential params); every value of extra_headers is sealed too.
var SealedFields = []string{"api_key", "azure_ad_token", "aws_access_key_id", "aws_secret_access_key",
	"aws_session_token", "vertex_credentials"}

// ErrSealedNoKey: a litellm_params value is sealed but no salt key is set.
var ErrSealedNoKey = errors.New("is encrypted at rest but neither LITELLM_SALT_KEY nor GATEWAY_SALT_KEY is set")

// ErrSealedWrongKey: a sealed value does not open with the salt key in force (sealed with
// another key, or altered).
var ErrSealedWrongKey = errors.New("cannot be decrypted with the configured salt key (LITELLM_SALT_KEY / GATEWAY_SALT_KEY): it was encrypted with another key or altered")

// newSealAEAD derives the AES-256-GCM cipher of a salt key (HKDF-SHA256, see above).
func newSealAEAD(key string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, []byte(key), nil, "lockstep litellm_params v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// SealingEnabled reports whether a salt key is set.
func (b *Builder) SealingEnabled() bool { return b.sealAEAD() != nil }

// sealAEAD is the salt key's cipher, nil when none (a nil b: the default policy, none).
func (b *Builder) sealAEAD() cipher.AEAD {
	if b == nil {
		return nil
	}
	return b.aead
}

// IsSealed reports whether v is a sealed value (see SealParams).
func IsSealed(v string) bool { return strings.HasPrefix(v, sealPrefix) }

// SealParams returns litellm_params (a JSON object) with each credential value
// ([SealedFields], every extra_headers value) that is a non-empty string, not yet sealed and
// not an "os.environ/NAME" reference, replaced by its sealed form. Every other byte is kept.
// Without a salt key, or for invalid JSON, params is returned as is.
func (b *Builder) SealParams(params []byte) []byte {
	aead := b.sealAEAD()
	if aead == nil || !format.ValidJSON(params) {
		return params
	}
	var edits []format.Edit
	add := func(field string, v gjson.Result) {
		if v.Type != gjson.String || v.Str == "" || IsSealed(v.Str) || strings.HasPrefix(v.Str, "os.environ/") {
			return
		}
		edits = append(edits, format.Edit{Start: v.Index, End: v.Index + len(v.Raw), Text: seal(aead, field, v.Str)})
	}
	gjson.ParseBytes(params).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "extra_headers" && v.IsObject():
			v.ForEach(func(hk, hv gjson.Result) bool { add("extra_headers."+hk.Str, hv); return true })
		case isSealedField(k.Str):
			add(k.Str, v)
		}
		return true
	})
	return format.ApplyEdits(params, edits)
}

func isSealedField(k string) bool {
	for _, f := range SealedFields {
		if f == k {
			return true
		}
	}
	return false
}

func seal(aead cipher.AEAD, field, v string) string {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(v)+aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	out := aead.Seal(nonce, nonce, []byte(v), []byte(field))
	return sealPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// unseal opens a sealed value of litellm_params field. Errors name the field and wrap
// [ErrSealedNoKey] or [ErrSealedWrongKey]:
//
//	litellm_params.api_key cannot be decrypted with the configured salt key (...)
func (b *Builder) unseal(field, v string) (string, error) {
	aead := b.sealAEAD()
	if aead == nil {
		return "", fmt.Errorf("litellm_params.%s %w", field, ErrSealedNoKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(v[len(sealPrefix):])
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("litellm_params.%s %w", field, ErrSealedWrongKey)
	}
	n := aead.NonceSize()
	clear, err := aead.Open(nil, raw[:n], raw[n:], []byte(field))
	if err != nil {
		return "", fmt.Errorf("litellm_params.%s %w", field, ErrSealedWrongKey)
	}
	return string(clear), nil
}
