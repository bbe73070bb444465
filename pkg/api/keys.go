package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/catalogue"
)

func (s *Server) keyRoutes() {
	s.e.POST("/key/generate", s.keyGenerate, s.auth(admin))
	s.e.POST("/key/update", s.keyUpdate, s.auth(admin))
	s.e.POST("/key/delete", s.keyDelete, s.auth(admin))
	s.e.GET("/key/info", s.keyInfo, s.auth(admin))
	s.e.GET("/key/list", s.keyList, s.auth(admin))
	s.e.POST("/key/regenerate", s.keyRegenerate, s.auth(admin))
	s.e.POST("/key/:key/regenerate", s.keyRegenerate, s.auth(admin))
	s.e.POST("/key/block", s.keyBlock(true), s.auth(admin))
	s.e.POST("/key/unblock", s.keyBlock(false), s.auth(admin))
	s.e.GET("/spend/logs", s.spendLogs, s.auth(admin))
}

// keyRequest is the body of /key/generate and /key/update, and their one list of accepted
// fields: any other member is a 400 naming it, nothing stored (decodeStrict, API.md "Keys").
type keyRequest = mgmt.KeyRequest

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
	LitellmFields  map[string]any  `json:"litellm_fields"`
}

// keyResponse renders a key row with its spend and next budget reset (ks nil: spend 0, no
// reset known).
func (s *Server) keyResponse(r mgmt.Row, ks *mgmt.KeySpend) (map[string]any, error) {
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
	out := map[string]any{"token": k.Token, "key_alias": k.KeyAlias, "models": k.Models, "blocked": k.Blocked,
		"expires": k.Expires, "metadata": k.Metadata, "team_id": k.TeamID, "user_id": k.UserID, "created_at": k.CreatedAt, "updated_at": k.UpdatedAt,
		"rpm_limit": k.RPMLimit, "tpm_limit": k.TPMLimit, "max_parallel_requests": k.MaxParallel,
		"max_budget": k.MaxBudget, "budget_duration": k.BudgetDuration, "spend": spent, "budget_reset_at": resetAt,
		"litellm_fields": k.LitellmFields}
	withLiteLLMFields(out) // aliases, tags, ... at the top level, as LiteLLM answers
	if _, ok := out["aliases"]; !ok {
		out["aliases"] = map[string]any{}
	}
	// LiteLLM_VerificationToken's rotation defaults for a key that never rotated
	for k, v := range map[string]any{"auto_rotate": false, "rotation_interval": nil, "rotation_count": 0, "last_rotation_at": nil, "key_rotation_at": nil} {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out, nil
}

// keyGenerate: POST /key/generate — returns the key once; only its sha256 is stored.
func (s *Server) keyGenerate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
		return err
	}
	var req keyRequest
	extra, err := decodeStrictModel(c, &req, catalogue.GenerateKey)
	if err != nil {
		return err
	}
	if err := s.checkKeyLinks(c.Request().Context(), extra); err != nil {
		return err
	}
	applyKeyType(extra) // key_type → allowed_routes, as LiteLLM
	if err := mgmt.CheckRotation(extra, time.Now()); err != nil {
		return err
	}
	req.Extra = extra
	res, err := s.mgmt.GenerateKeyAs(c.Request().Context(), mgmtCaller(caller(c)), req)
	if err != nil {
		return err
	}
	return s.keyOK(c, res)
}

// keyOK answers with a key a write made or changed (the key itself included, as given).
func (s *Server) keyOK(c echo.Context, res mgmt.KeyResult) error {
	out, err := s.keyResponse(res.Row, res.Spend)
	if err != nil {
		return err
	}
	out["key"] = res.Key
	out["token_id"] = out["token"] // LiteLLM GenerateKeyResponse.token_id: the key's hash
	return c.JSON(http.StatusOK, out)
}

// keyUpdate: POST /key/update {"key", ...fields}.
func (s *Server) keyUpdate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
		return err
	}
	var req keyRequest
	extra, err := decodeStrictModel(c, &req, catalogue.UpdateKey)
	if err != nil {
		return err
	}
	if err := s.checkKeyLinks(c.Request().Context(), extra); err != nil {
		return err
	}
	if err := mgmt.CheckTempBudget(extra, time.Now()); err != nil {
		return err
	}
	if err := mgmt.CheckRotation(extra, time.Now()); err != nil {
		return err
	}
	req.Extra = extra
	res, err := s.mgmt.UpdateKeyAs(c.Request().Context(), mgmtCaller(caller(c)), req)
	if err != nil {
		return err
	}
	return s.keyOK(c, res)
}

// keyBlock: POST /key/block and /key/unblock {"key"} — the key is refused (or served again) on
// every replica as soon as the change is applied there.
func (s *Server) keyBlock(blocked bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
			return err
		}
		var req struct {
			Key string `json:"key"`
		}
		if err := decodeStrict(c, &req); err != nil {
			return err
		}
		res, err := s.mgmt.BlockKey(c.Request().Context(), req.Key, blocked)
		if err != nil {
			return err
		}
		return s.keyOK(c, res)
	}
}

// keyRegenerate: POST /key/regenerate {"key", "new_key"?} (also /key/{key}/regenerate) — the
// key gets a new value (new_key when given, which must start with sk-; else a random one); its
// settings and spend move with it and the old value is refused on every replica.
func (s *Server) keyRegenerate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
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
	res, err := s.mgmt.RegenerateKeyAs(c.Request().Context(), mgmtCaller(caller(c)), req.Key, req.NewKey)
	if err != nil {
		return err
	}
	return s.keyOK(c, res)
}

// keyDelete: POST /key/delete {"keys": [...]} → {"deleted_keys": [...]}. All or nothing:
// an unknown key fails the call before anything is deleted.
func (s *Server) keyDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
		return err
	}
	var req struct {
		Keys []string `json:"keys"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if err := s.mgmt.DeleteKeysAs(c.Request().Context(), mgmtCaller(caller(c)), req.Keys); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deleted_keys": req.Keys})
}

// keyInfo: GET /key/info?key= — the key's settings, spend (cluster total as flushed, plus this
// replica's unflushed spend) and budget_reset_at. A virtual key without ?key= reads itself; a
// key it may not see (admin.KeyAs) is 404 "Key not found", as an absent one.
func (s *Server) keyInfo(c echo.Context) error {
	k := c.QueryParam("key")
	if p := caller(c); p.Key != nil && k == "" {
		k = bearer(c) // LiteLLM: /key/info without ?key= is the caller's own
	}
	if k == "" {
		return badRequest("key query parameter is required")
	}
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
		return err
	}
	row, ks, err := s.mgmt.KeyAs(c.Request().Context(), mgmtCaller(caller(c)), k)
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
	if err := s.requireDB(mgmt.TypeKey, "keys"); err != nil {
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
	rows, total, spends, err := s.mgmt.KeysAs(c.Request().Context(), mgmtCaller(caller(c)), page, size)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		var ks *mgmt.KeySpend
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

// spendLogs: GET /spend/logs?api_key=<token or key>&request_id=&user_id=&start_date=&end_date=
// → the spend logs (LiteLLM SpendLogs rows, spendLogJSON), newest first; request_id matches the
// answer's id (or the call id of a log without one). Dates are YYYY-MM-DD (end_date inclusive) or RFC 3339.
func (s *Server) spendLogs(c echo.Context) error {
	if s.DB == nil {
		return errf(http.StatusServiceUnavailable, "service_unavailable", "no database configured: spend logs are stored in Postgres; set --database-url or general_settings.database_url")
	}
	token := ""
	if k := c.QueryParam("api_key"); k != "" {
		token = mgmt.TokenOf(k)
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
	userID := c.QueryParam("user_id")
	if own := ownUser(c); own != "" {
		userID = own // an internal user's own logs (LiteLLM forces user_id to the caller's)
	}
	logs, err := s.DB.SpendLogsWhere(c.Request().Context(), mgmt.SpendLogFilter{Token: token,
		RequestID: c.QueryParam("request_id"), UserID: userID, Start: start, End: end})
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(logs))
	for i, l := range logs {
		out[i] = spendLogJSON(l)
	}
	return c.JSON(http.StatusOK, out)
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
