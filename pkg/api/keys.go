package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
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
	s.e.GET("/key/list", s.keyList, s.auth(admin))
	s.e.POST("/key/regenerate", s.keyRegenerate, s.auth(admin))
	s.e.POST("/key/:key/regenerate", s.keyRegenerate, s.auth(admin))
	s.e.POST("/key/block", s.keyBlock(true), s.auth(admin))
	s.e.POST("/key/unblock", s.keyBlock(false), s.auth(admin))
	s.e.GET("/spend/logs", s.spendLogs, s.auth(admin))
}

// optional is a JSON field that may be absent, null or a value.
type optional struct {
	set bool
	raw json.RawMessage // "null" when null
}

func (o *optional) UnmarshalJSON(b []byte) error {
	o.set, o.raw = true, append(json.RawMessage(nil), b...)
	return nil
}

func (o optional) null() bool { return o.set && bytes.Equal(bytes.TrimSpace(o.raw), []byte("null")) }

// keyRequest is the body of /key/generate and /key/update, and their one list of accepted
// fields: any other member is a 400 naming it, nothing stored (decodeStrict, API.md "Keys").
type keyRequest struct {
	Key      string          `json:"key"` // generate: a custom key; update: the key (or its token hash)
	Models   *[]string       `json:"models"`
	KeyAlias *string         `json:"key_alias"`
	Duration *string         `json:"duration"`
	Metadata json.RawMessage `json:"metadata"`
	Blocked  *bool           `json:"blocked"`
	TeamID   *string         `json:"team_id"`
	UserID   *string         `json:"user_id"`

	RPMLimit       optional `json:"rpm_limit"`
	TPMLimit       optional `json:"tpm_limit"`
	MaxParallel    optional `json:"max_parallel_requests"`
	MaxBudget      optional `json:"max_budget"`
	BudgetDuration optional `json:"budget_duration"`
}

type keyRowJSON struct {
	Token          string          `json:"token"`
	KeyAlias       *string         `json:"key_alias"`
	Models         []string        `json:"models"`
	Blocked        bool            `json:"blocked"`
	Expires        *time.Time      `json:"expires"`
	Metadata       json.RawMessage `json:"metadata"`
	RPMLimit       *int64          `json:"rpm_limit"`
	TPMLimit       *int64          `json:"tpm_limit"`
	MaxParallel    *int64          `json:"max_parallel_requests"`
	MaxBudget      *float64        `json:"max_budget"`
	BudgetDuration *string         `json:"budget_duration"`
	TeamID         *string         `json:"team_id"`
	UserID         *string         `json:"user_id"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// limitValue decodes a non-negative integer limit field (null clears it).
func limitValue(o optional, field string) (any, error) {
	if o.null() {
		return nil, nil
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(o.raw))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return nil, badRequest("%s must be a non-negative integer or null, got %s", field, o.raw)
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || v < 0 || (field == "max_parallel_requests" && v > math.MaxInt32) {
		return nil, badRequest("%s must be a non-negative integer or null, got %s", field, o.raw)
	}
	return v, nil
}

// keyValues turns a key request into column values; budgetChange reports whether
// budget_duration was given (so budget_reset_at moves), with its new value (0: none).
func keyValues(req keyRequest) (store.Values, bool, time.Duration, error) {
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
			return nil, false, 0, badRequest("%v", err)
		}
		v["expires"] = time.Now().Add(d)
	}
	if !isNull(req.Metadata) {
		if _, err := objectOf(req.Metadata, "metadata"); err != nil {
			return nil, false, 0, err
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
	for _, f := range []struct {
		o    optional
		name string
	}{{req.RPMLimit, "rpm_limit"}, {req.TPMLimit, "tpm_limit"}, {req.MaxParallel, "max_parallel_requests"}} {
		if !f.o.set {
			continue
		}
		val, err := limitValue(f.o, f.name)
		if err != nil {
			return nil, false, 0, err
		}
		v[f.name] = val
	}
	if req.MaxBudget.set {
		if req.MaxBudget.null() {
			v["max_budget"] = nil
		} else {
			var f float64
			if err := json.Unmarshal(req.MaxBudget.raw, &f); err != nil || f < 0 || math.IsInf(f, 0) {
				return nil, false, 0, badRequest("max_budget must be a non-negative number (USD) or null, got %s", req.MaxBudget.raw)
			}
			v["max_budget"] = f
		}
	}
	var every time.Duration
	if req.BudgetDuration.set {
		if req.BudgetDuration.null() {
			v["budget_duration"] = nil
		} else {
			var str string
			if err := json.Unmarshal(req.BudgetDuration.raw, &str); err != nil {
				return nil, false, 0, badRequest("budget_duration must be a duration string like 30s, 1h, 1d, 30d or 1mo, got %s", req.BudgetDuration.raw)
			}
			if str == "" {
				v["budget_duration"] = nil
			} else {
				d, err := keys.ParseDuration(str)
				if err != nil {
					return nil, false, 0, badRequest("budget_%v", err)
				}
				every = d
				v["budget_duration"] = str
			}
		}
	}
	return v, req.BudgetDuration.set, every, nil
}

// tokenOf accepts either a key ("sk-...") or its stored sha256 token.
func tokenOf(k string) string {
	if len(k) == 64 && !hasPrefix(k, "sk-") {
		return k
	}
	return keys.Hash(k)
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// keyResponse renders a key row with its spend and next budget reset (ks nil: spend 0, no
// reset known).
func (s *Server) keyResponse(r store.Row, ks *store.KeySpend) (map[string]any, error) {
	var k keyRowJSON
	if err := json.Unmarshal(r.Data, &k); err != nil {
		return nil, err
	}
	spent := 0.0
	var resetAt *time.Time
	if ks != nil {
		spent, resetAt = ks.Spend, ks.BudgetResetAt
	}
	if s.Spend != nil {
		spent += s.Spend.Unflushed(k.Token)
	}
	return map[string]any{"token": k.Token, "key_alias": k.KeyAlias, "models": k.Models, "blocked": k.Blocked,
		"expires": k.Expires, "metadata": k.Metadata, "team_id": k.TeamID, "user_id": k.UserID, "created_at": k.CreatedAt, "updated_at": k.UpdatedAt,
		"rpm_limit": k.RPMLimit, "tpm_limit": k.TPMLimit, "max_parallel_requests": k.MaxParallel,
		"max_budget": k.MaxBudget, "budget_duration": k.BudgetDuration, "spend": spent, "budget_reset_at": resetAt}, nil
}

// keySpendOf reads the spend row of token (nil when there is none).
func (s *Server) keySpendOf(c echo.Context, token string) (*store.KeySpend, error) {
	got, err := s.Store.GetKeySpend(c.Request().Context(), []string{token})
	if err != nil {
		return nil, err
	}
	if ks, ok := got[token]; ok {
		return &ks, nil
	}
	return nil, nil
}

func customKey(k string) error {
	if !strings.HasPrefix(k, "sk-") {
		return badRequest("key: a custom key must start with 'sk-'")
	}
	if len(k) < 4 || strings.TrimSpace(k) != k {
		return badRequest("key: a custom key needs characters after 'sk-' and no surrounding spaces")
	}
	return nil
}

// keyGenerate: POST /key/generate — returns the key once; only its sha256 is stored.
func (s *Server) keyGenerate(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	var req keyRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	vals, budgetSet, every, err := keyValues(req)
	if err != nil {
		return err
	}
	if err := s.checkKeyOwners(c.Request().Context(), vals, nil); err != nil {
		return err
	}
	key := req.Key
	if key == "" {
		key = keys.Generate()
	} else if err := customKey(key); err != nil {
		return err
	}
	vals["token"] = keys.Hash(key)
	var row store.Row
	var resetAt *time.Time
	err = s.Store.Tx(c.Request().Context(), func(tx *store.TxStore) error {
		var err error
		if row, err = tx.Insert(c.Request().Context(), store.Key, vals); err != nil {
			return err
		}
		if budgetSet && every > 0 {
			resetAt, err = tx.SetBudgetReset(c.Request().Context(), row.ID, every)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.Keys.Apply([]store.Row{row}, nil)
	out, err := s.keyResponse(row, &store.KeySpend{BudgetResetAt: resetAt})
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
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if req.Key == "" {
		return badRequest("key is required")
	}
	vals, budgetSet, every, err := keyValues(req)
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		return badRequest("nothing to update: give models, key_alias, duration, metadata, blocked, rpm_limit, tpm_limit, max_parallel_requests, max_budget or budget_duration")
	}
	if err := s.checkKeyOwners(c.Request().Context(), vals, &req); err != nil {
		return err
	}
	return s.updateKey(c, req.Key, vals, budgetSet, every)
}

// updateKey writes vals to the key (and moves its budget reset when budgetSet) and answers
// with the key.
func (s *Server) updateKey(c echo.Context, key string, vals store.Values, budgetSet bool, every time.Duration) error {
	ctx := c.Request().Context()
	token := tokenOf(key)
	var row store.Row
	var resetAt *time.Time
	err := s.Store.Tx(ctx, func(tx *store.TxStore) error {
		var err error
		if row, err = tx.Update(ctx, store.Key, token, vals); err != nil {
			return err
		}
		if budgetSet {
			resetAt, err = tx.SetBudgetReset(ctx, token, every)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusNotFound, "not_found_error", "Key not found")
	}
	if err != nil {
		return err
	}
	s.Keys.Apply([]store.Row{row}, nil)
	ks, err := s.keySpendOf(c, token)
	if err != nil {
		ks = &store.KeySpend{BudgetResetAt: resetAt}
	}
	out, err := s.keyResponse(row, ks)
	if err != nil {
		return err
	}
	out["key"] = key
	return c.JSON(http.StatusOK, out)
}

// keyBlock: POST /key/block and /key/unblock {"key"} — the key is refused (or served again) on
// every replica as soon as the change is applied there.
func (s *Server) keyBlock(blocked bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(store.Key, "keys"); err != nil {
			return err
		}
		var req struct {
			Key string `json:"key"`
		}
		if err := decodeStrict(c, &req); err != nil {
			return err
		}
		if req.Key == "" {
			return badRequest("key is required")
		}
		return s.updateKey(c, req.Key, store.Values{"blocked": blocked}, false, 0)
	}
}

// keyRegenerate: POST /key/regenerate {"key", "new_key"?} (also /key/{key}/regenerate) — the
// key gets a new value (new_key when given, which must start with sk-; else a random one); its
// settings and spend move with it and the old value is refused on every replica.
func (s *Server) keyRegenerate(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	var req struct {
		Key    string `json:"key"`
		NewKey string `json:"new_key"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c, &req); err != nil {
			return err
		}
	}
	if p := c.Param("key"); p != "" {
		req.Key = p
	}
	if req.Key == "" {
		return badRequest("key is required")
	}
	newKey := req.NewKey
	if newKey == "" {
		newKey = keys.Generate()
	} else if err := customKey(newKey); err != nil {
		return err
	}
	ctx := c.Request().Context()
	oldToken, newToken := tokenOf(req.Key), keys.Hash(newKey)
	var row store.Row
	var oldVersion int64
	err := s.Store.Tx(ctx, func(tx *store.TxStore) error {
		old, err := tx.Get(ctx, store.Key, oldToken)
		if err != nil {
			return err
		}
		oldVersion = old.Version
		if row, err = tx.Update(ctx, store.Key, oldToken, store.Values{"token": newToken}); err != nil {
			return err
		}
		return tx.MoveKeySpend(ctx, oldToken, newToken)
	})
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusNotFound, "not_found_error", "Key not found")
	}
	if err != nil {
		return err
	}
	// the trigger logged the old token as deleted at its version + 1 (a primary-key change)
	s.Keys.Apply([]store.Row{row}, map[string]int64{oldToken: oldVersion + 1})
	ks, _ := s.keySpendOf(c, newToken)
	out, err := s.keyResponse(row, ks)
	if err != nil {
		return err
	}
	out["key"] = newKey
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
	if err := decodeStrict(c, &req); err != nil {
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

// keyInfo: GET /key/info?key= — the key's settings, spend (cluster total as flushed, plus this
// replica's unflushed spend) and budget_reset_at.
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
	ks, err := s.keySpendOf(c, row.ID)
	if err != nil {
		return err
	}
	info, err := s.keyResponse(row, ks)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"key": k, "info": info})
}

// keyList: GET /key/list?page=&size= → {"keys": [{"token", "key_alias", ...settings}],
// "total_count", "current_page", "total_pages"}. Keys are listed by token (the sha256 of the
// key) and alias; a raw key is never stored, so never listed.
func (s *Server) keyList(c echo.Context) error {
	if err := s.requireDB(store.Key, "keys"); err != nil {
		return err
	}
	page, err := queryInt(c, "page", 1, 1, math.MaxInt32)
	if err != nil {
		return err
	}
	size, err := queryInt(c, "size", 10, 1, 100)
	if err != nil {
		return err
	}
	rows, total, err := s.Store.ListPage(c.Request().Context(), store.Key, page, size)
	if err != nil {
		return err
	}
	tokens := make([]string, len(rows))
	for i, r := range rows {
		tokens[i] = r.ID
	}
	spends, err := s.Store.GetKeySpend(c.Request().Context(), tokens)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		var ks *store.KeySpend
		if v, ok := spends[r.ID]; ok {
			ks = &v
		}
		m, err := s.keyResponse(r, ks)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out, "total_count": total, "current_page": page,
		"total_pages": (total + size - 1) / size})
}

func queryInt(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s must be an integer from %d to %d, got %q", name, lo, hi, v)
	}
	return n, nil
}

// spendLogs: GET /spend/logs?api_key=<token or key>&start_date=&end_date= → the spend logs
// (LiteLLM SpendLogs rows), newest first. Dates are YYYY-MM-DD (end_date inclusive) or RFC 3339.
func (s *Server) spendLogs(c echo.Context) error {
	if s.Store == nil {
		return errf(http.StatusServiceUnavailable, "service_unavailable", "no database configured: spend logs are stored in Postgres; set --database-url or general_settings.database_url")
	}
	token := ""
	if k := c.QueryParam("api_key"); k != "" {
		token = tokenOf(k)
	}
	start, err := parseDate(c.QueryParam("start_date"), "start_date", false)
	if err != nil {
		return err
	}
	end, err := parseDate(c.QueryParam("end_date"), "end_date", true)
	if err != nil {
		return err
	}
	if s.Spend != nil {
		// this replica's own calls are visible at once
		_ = s.Spend.Flush(c.Request().Context())
	}
	logs, err := s.Store.SpendLogs(c.Request().Context(), token, start, end, 10000)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, logs)
}

// parseDate reads a YYYY-MM-DD date (UTC; as an end, the day after it) or an RFC 3339 time.
func parseDate(v, field string, end bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		if end {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, badRequest("%s must be a date YYYY-MM-DD or an RFC 3339 time, got %q", field, v)
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
