package api

import (
	"encoding/json"
	"errors"

	"golang.org/x/crypto/bcrypt"
)

// A user's password (LiteLLM NewUserRequest / UpdateUserRequest "password": LiteLLM keeps a
// hash of it for its UI login, never the password): lockstep stores only a bcrypt hash in the
// user's litellm_fields and never returns it (accountJSON drops it). lockstep has no
// password login, so the hash is kept for a migration back, not read.

// hashPassword replaces lf's "password" (a string, checked by the catalogue) with its bcrypt
// hash; "" and null clear it. Errors: a 400 for a password bcrypt cannot take (over 72 bytes).
func hashPassword(lf map[string]json.RawMessage) error {
	raw, ok := lf["password"]
	if !ok {
		return nil
	}
	var pw string
	if isNull(raw) || json.Unmarshal(raw, &pw) != nil || pw == "" {
		lf["password"] = json.RawMessage("null")
		return nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return badRequest("password: must be at most 72 bytes")
	}
	if err != nil {
		return err
	}
	lf["password"], _ = json.Marshal(string(h))
	return nil
}

// dropPassword removes the stored password hash from an account row's litellm_fields.
func dropPassword(m map[string]any) {
	if lf, ok := m["litellm_fields"].(map[string]any); ok {
		delete(lf, "password")
	}
}
