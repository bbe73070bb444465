package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

func (s *Server) keyRoutes() {
	s.e.POST("/key/generate", s.keyGenerate, s.auth(admin))
	s.e.POST("/key/update", s.keyUpdate, s.auth(admin))
	s.e.POST("/key/delete", s.keyDelete, s.auth(admin))
	s.e.GET("/key/info", s.keyInfo, s.auth(admin))
}

type keyRequest struct {
	Key      string          `json:"key"` // update: the key (or its token hash)
	Models   *[]string       `json:"models"`
	KeyAlias *string         `json:"key_alias"`
	Duration *string         `json:"duration"`
	Metadata json.RawMessage `json:"metadata"`
	Blocked  *bool           `json:"blocked"`
}

type keyRowJSON struct {
	Token     string          `json:"token"`
	KeyAlias  *string         `json:"key_alias"`
	Models    []string        `json:"models"`
	Blocked   bool            `json:"blocked"`
	Expires   *time.Time      `json:"expires"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

func keyValues(req keyRequest) (store.Values, error) {
	v := store.Values{}
	if req.Models != nil {
		m := *req.Models
		if m == nil {
			m = []string{}
		}
		v["models"] = m
	}
	if req.KeyAlias != nil {
		v["key_alias"] = *req.KeyAlias
	}
	if req.Duration != nil && *req.Duration != "" {
		d, err := keys.ParseDuration(*req.Duration)
		if err != nil {
			return nil, badRequest("%v", err)
		}
		v["expires"] = time.Now().Add(d)
	}
	if !isNull(req.Metadata) {
		if _, err := objectOf(req.Metadata, "metadata"); err != nil {
			return nil, err
		}
		v["metadata"] = []byte(req.Metadata)
	}
	if req.Blocked != nil {
		v["blocked"] = *req.Blocked
	}
	return v, nil
}

// tokenOf accepts either a key ("sk-...") or its stored sha256 token.
func tokenOf(k string) string {
	if len(k) == 64 && !hasPrefix(k, "sk-") {
		return k
	}
	return keys.Hash(k)
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func keyResponse(r store.Row) (map[string]any, error) {
	var k keyRowJSON
	if err := json.Unmarshal(r.Data, &k); err != nil {
		return nil, err
	}
	return map[string]any{"token": k.Token, "key_alias": k.KeyAlias, "models": k.Models, "blocked": k.Blocked,
		"expires": k.Expires, "metadata": k.Metadata, "created_at": k.CreatedAt, "updated_at": k.UpdatedAt}, nil
}

// keyGenerate: POST /key/generate — returns the key once; only its sha256 is stored.
func (s *Server) keyGenerate(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	var req keyRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	vals, err := keyValues(req)
	if err != nil {
		return err
	}
	key := keys.Generate()
	vals["token"] = keys.Hash(key)
	row, err := s.Store.Insert(c.Request().Context(), store.Key, vals)
	if err != nil {
		return err
	}
	s.Keys.Apply([]store.Row{row}, nil)
	out, err := keyResponse(row)
	if err != nil {
		return err
	}
	out["key"] = key
	return c.JSON(http.StatusOK, out)
}

// keyUpdate: POST /key/update {"key", ...fields}.
func (s *Server) keyUpdate(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	var req keyRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Key == "" {
		return badRequest("key is required")
	}
	vals, err := keyValues(req)
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		return badRequest("nothing to update: give models, key_alias, duration, metadata or blocked")
	}
	row, err := s.Store.Update(c.Request().Context(), store.Key, tokenOf(req.Key), vals)
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusNotFound, "not_found_error", "Key not found")
	}
	if err != nil {
		return err
	}
	s.Keys.Apply([]store.Row{row}, nil)
	out, err := keyResponse(row)
	if err != nil {
		return err
	}
	out["key"] = req.Key
	return c.JSON(http.StatusOK, out)
}

// keyDelete: POST /key/delete {"keys": [...]} → {"deleted_keys": [...]}. All or nothing:
// an unknown key fails the call before anything is deleted.
func (s *Server) keyDelete(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	var req struct {
		Keys []string `json:"keys"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Keys) == 0 {
		return badRequest("keys is required: a non-empty list of keys to delete")
	}
	ctx := c.Request().Context()
	for _, k := range req.Keys {
		if _, err := s.Store.Get(ctx, store.Key, tokenOf(k)); errors.Is(err, store.ErrNotFound) {
			return errf(http.StatusNotFound, "not_found_error", "Key not found: %s", redact(k))
		} else if err != nil {
			return err
		}
	}
	absent := map[string]int64{}
	for _, k := range req.Keys {
		v, err := s.Store.Delete(ctx, store.Key, tokenOf(k))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		absent[tokenOf(k)] = v
	}
	s.Keys.Apply(nil, absent)
	return c.JSON(http.StatusOK, map[string]any{"deleted_keys": req.Keys})
}

func redact(k string) string {
	if len(k) <= 8 {
		return "****"
	}
	return k[:5] + "****" + k[len(k)-4:]
}

// keyInfo: GET /key/info?key=.
func (s *Server) keyInfo(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	k := c.QueryParam("key")
	if k == "" {
		return badRequest("key query parameter is required")
	}
	row, err := s.Store.Get(c.Request().Context(), store.Key, tokenOf(k))
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusNotFound, "not_found_error", "Key not found")
	}
	if err != nil {
		return err
	}
	info, err := keyResponse(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"key": k, "info": info})
}
