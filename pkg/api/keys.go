package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

func (s *Server) keyRoutes() {
	s.e.POST("/key/generate", s.keyGenerate, s.auth(admin))
	s.e.POST("/key/update", s.keyUpdate, s.auth(admin))
	s.e.POST("/key/delete", s.keyDelete, s.auth(admin))
	s.e.GET("/key/info", s.keyInfo, s.auth(anyKey))
}

type keyRequest struct {
	Key      string          `json:"key"` // update: the key (or its token hash)
	Models   *[]string       `json:"models"`
	KeyAlias *string         `json:"key_alias"`
	Duration *string         `json:"duration"`
	Metadata json.RawMessage `json:"metadata"`
	Blocked  *bool           `json:"blocked"`
	TeamID   *string         `json:"team_id"`
	UserID   *string         `json:"user_id"`
}

type keyRowJSON struct {
	Token     string          `json:"token"`
	KeyAlias  *string         `json:"key_alias"`
	Models    []string        `json:"models"`
	Blocked   bool            `json:"blocked"`
	Expires   *time.Time      `json:"expires"`
	Metadata  json.RawMessage `json:"metadata"`
	TeamID    *string         `json:"team_id"`
	UserID    *string         `json:"user_id"`
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
	for col, p := range map[string]*string{"team_id": req.TeamID, "user_id": req.UserID} {
		if p != nil {
			if *p == "" {
				v[col] = nil
			} else {
				v[col] = *p
			}
		}
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
		"expires": k.Expires, "metadata": k.Metadata, "team_id": k.TeamID, "user_id": k.UserID, "created_at": k.CreatedAt, "updated_at": k.UpdatedAt}, nil
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
	if err := s.checkKeyOwners(c.Request().Context(), vals, nil); err != nil {
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
	if err := s.checkKeyOwners(c.Request().Context(), vals, &req); err != nil {
		return err
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
	k := c.QueryParam("key")
	if p := caller(c); p.key != nil {
		// a virtual key sees its own info only (LiteLLM: /key/info without ?key= is the caller's)
		if k == "" {
			k = bearer(c)
		}
		if tokenOf(k) != p.key.Token {
			return authErr(http.StatusForbidden, "Authentication Error, a virtual key may only read its own info: call /key/info without ?key= or with the key itself.")
		}
	}
	if k == "" {
		return badRequest("key query parameter is required")
	}
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
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

// checkKeyOwners checks a key write's team_id and user_id (LiteLLM /key/generate): the team and
// the user must exist (400 naming the id), and a team key's models must be within the team's
// models (400 naming the models the team does not allow). On update (upd non-nil) the stored
// key's team and models are used for whichever the write does not change.
func (s *Server) checkKeyOwners(ctx context.Context, vals store.Values, upd *keyRequest) error {
	teamID, _ := vals["team_id"].(string)
	models, hasModels := vals["models"].([]string)
	if upd != nil && (teamID != "" || hasModels) {
		row, err := s.Store.Get(ctx, store.Key, tokenOf(upd.Key))
		if errors.Is(err, store.ErrNotFound) {
			return errf(http.StatusNotFound, "not_found_error", "Key not found")
		}
		if err != nil {
			return err
		}
		cur, err := keys.BuildRow(row)
		if err != nil {
			return err
		}
		if _, set := vals["team_id"]; !set {
			teamID = cur.TeamID
		}
		if !hasModels {
			models = cur.Models
		}
	}
	if uid, _ := vals["user_id"].(string); uid != "" {
		if _, err := s.Store.Get(ctx, store.User, uid); errors.Is(err, store.ErrNotFound) {
			return badRequest("user_id: user %s does not exist; create it with /user/new", uid)
		} else if err != nil {
			return err
		}
	}
	if teamID == "" {
		return nil
	}
	row, err := s.Store.Get(ctx, store.Team, teamID)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("team_id: team %s does not exist; create it with /team/new", teamID)
	}
	if err != nil {
		return err
	}
	team, err := accounts.BuildTeamRow(row)
	if err != nil {
		return err
	}
	if keys.ListAllows(team.Models, keys.AllProxyModels, nil) {
		return nil // the team may use every model
	}
	var outside []string
	for _, m := range models {
		if !s.teamAllows(team, m) {
			outside = append(outside, m)
		}
	}
	if len(models) == 0 || contains(models, keys.AllProxyModels) {
		outside = nil // a key without its own list gets the team's models
	}
	if len(outside) > 0 {
		return badRequest("Model not in team's allowed models: %s. Team %s can only access models=%s", pyList(outside), teamID, pyList(team.Models))
	}
	return nil
}

// teamAllows reports whether the team allows name, a model group or an access group name.
func (s *Server) teamAllows(t *accounts.Team, name string) bool {
	if keys.ListAllows(t.Models, name, groupAccess(s.Router.Models().Load().ByName(name))) {
		return true
	}
	return contains(t.Models, name) // an access group the team names
}

func contains(l []string, v string) bool {
	for _, s := range l {
		if s == v {
			return true
		}
	}
	return false
}
