package api

// LiteLLM's spend reports (its spend_tracking/spend_management_endpoints.py, and the views of
// its db/create_views.py: MonthlyGlobalSpend, MonthlyGlobalSpendPerKey,
// MonthlyGlobalSpendPerUserPerKey, Last30dKeysBySpend, Last30dModelsBySpend), over
// gateway.spend_logs: the same routes, parameters, date semantics and answer shapes. Every
// replica answers from Postgres after flushing its own unflushed logs, so a call made
// anywhere is in the report once its replica flushed (at most 1 s).
//
// An internal_user or internal_user_viewer (admin.ScopeOwn on the routes that let them in,
// admin/authz.go) sees its own user's spend only, as LiteLLM's *_internal_user variants.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
)

func (s *Server) spendReportRoutes() {
	s.e.GET("/global/spend", s.globalSpend, s.auth(admin))
	s.e.GET("/global/spend/logs", s.globalSpendLogs, s.auth(admin))
	s.e.GET("/global/spend/keys", s.globalSpendKeys, s.auth(admin))
	s.e.GET("/global/spend/teams", s.globalSpendTeams, s.auth(admin))
	s.e.POST("/global/spend/end_users", s.globalSpendEndUsers, s.auth(admin))
	s.e.GET("/global/spend/models", s.globalSpendModels, s.auth(admin))
	s.e.GET("/global/spend/provider", s.globalSpendProvider, s.auth(admin))
	s.e.GET("/global/spend/report", s.globalSpendReport, s.auth(admin))
	s.e.POST("/global/spend/reset", s.globalSpendReset, s.auth(admin))
	s.e.GET("/global/activity", s.globalActivity(false), s.auth(admin))
	s.e.GET("/global/activity/model", s.globalActivity(true), s.auth(admin))
	s.e.GET("/global/all_end_users", s.globalAllEndUsers, s.auth(admin))
	s.e.GET("/global/spend/tags", s.globalSpendTags, s.auth(admin))
	s.e.GET("/global/spend/all_tag_names", s.globalSpendTagNames, s.auth(admin))
	s.e.GET("/spend/tags", s.spendTags, s.auth(admin))
}

// globalSpendTags: GET /global/spend/tags?start_date=&end_date=[&tags=a,b] → the spend per
// request tag (metadata.tags) between the dates, both included, highest first:
// {"spend_per_tag": [{"name", "spend" (rounded to 4 places), "log_count"}]}; tags (comma-
// separated; "all-tags" or none: every tag) selects tags (LiteLLM ui_get_spend_by_tags over
// its DailyTagSpend view).
func (s *Server) globalSpendTags(c echo.Context) error {
	start, end, err := reportDates(c)
	if err != nil {
		return err
	}
	var only []string
	if v := c.QueryParam("tags"); v != "" {
		for _, t := range strings.Split(v, ",") {
			if t == "all-tags" {
				only = nil
				break
			}
			only = append(only, t)
		}
	}
	rows, err := s.report(c, `SELECT tag AS name, sum(spend)::float8 AS spend, count(*) AS log_count
		FROM gateway.spend_logs, jsonb_array_elements_text(request_tags) AS tag
		WHERE start_time::date >= $1::date AND start_time::date <= $2::date AND (coalesce(cardinality($3::text[]), 0) = 0 OR tag = ANY($3::text[]))
			AND ($4 = '' OR user_id = $4)
		GROUP BY tag ORDER BY spend DESC`, start, end, only, ownUser(c))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if v, ok := r["spend"].(float64); ok {
			r["spend"], _ = strconv.ParseFloat(strconv.FormatFloat(v, 'f', 4, 64), 64)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"spend_per_tag": rows})
}

// globalSpendTagNames: GET /global/spend/all_tag_names → {"tag_names": [every request tag]}.
func (s *Server) globalSpendTagNames(c echo.Context) error {
	rows, err := s.report(c, `SELECT DISTINCT tag FROM gateway.spend_logs, jsonb_array_elements_text(request_tags) AS tag ORDER BY tag`)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(rows))
	for _, r := range rows {
		out = append(out, r["tag"])
	}
	return c.JSON(http.StatusOK, map[string]any{"tag_names": out})
}

// spendTags: GET /spend/tags → [{"individual_request_tag", "log_count", "total_spend"}], every
// request tag over all time (LiteLLM's get_spend_by_tags).
func (s *Server) spendTags(c echo.Context) error {
	rows, err := s.report(c, `SELECT tag AS individual_request_tag, count(*) AS log_count, sum(spend)::float8 AS total_spend
		FROM gateway.spend_logs, jsonb_array_elements_text(request_tags) AS tag WHERE ($1 = '' OR user_id = $1)
		GROUP BY tag ORDER BY total_spend DESC`, ownUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// reportStore is the database behind the reports, with this replica's own logs flushed first.
func (s *Server) reportStore(c echo.Context) (mgmt.Database, error) {
	if s.DB == nil {
		return nil, errf(http.StatusServiceUnavailable, "service_unavailable", "no database configured: spend logs are stored in Postgres; set --database-url or general_settings.database_url")
	}
	if s.Spend != nil {
		_ = s.Spend.Flush(c.Request().Context())
	}
	return s.DB, nil
}

// ownUser is the user whose spend an internal user's report is limited to; "" for a caller
// who sees every user's (ScopeAll).
func ownUser(c echo.Context) string {
	mc := mgmtCaller(caller(c))
	if mc.Scope == mgmt.ScopeAll {
		return ""
	}
	if uid := mc.UserID(); uid != "" {
		return uid
	}
	return "\x00" // a caller without a user sees nothing (no spend log has this user)
}

func (s *Server) report(c echo.Context, query string, args ...any) ([]map[string]any, error) {
	st, err := s.reportStore(c)
	if err != nil {
		return nil, err
	}
	return st.SpendReport(c.Request().Context(), query, args...)
}

// reportDates reads LiteLLM's required start_date and end_date (YYYY-MM-DD): 400 "Please
// provide start_date and end_date" when one is missing.
func reportDates(c echo.Context) (time.Time, time.Time, error) {
	sd, ed := c.QueryParam("start_date"), c.QueryParam("end_date")
	if sd == "" || ed == "" {
		return time.Time{}, time.Time{}, badRequest("Please provide start_date and end_date")
	}
	start, err := time.Parse("2006-01-02", sd)
	if err != nil {
		return time.Time{}, time.Time{}, badRequest("start_date must be a date YYYY-MM-DD, got %q", sd)
	}
	end, err := time.Parse("2006-01-02", ed)
	if err != nil {
		return time.Time{}, time.Time{}, badRequest("end_date must be a date YYYY-MM-DD, got %q", ed)
	}
	return start, end, nil
}

const last30 = `start_time >= (CURRENT_DATE - INTERVAL '30 days')`

// globalSpend: GET /global/spend → {"spend": USD of the last 30 days, "max_budget": the
// proxy-wide budget (litellm_settings.max_budget; 0.0 without one)}.
func (s *Server) globalSpend(c echo.Context) error {
	rows, err := s.report(c, `SELECT coalesce(sum(spend), 0)::float8 AS total_spend FROM gateway.spend_logs WHERE `+last30)
	if err != nil {
		return err
	}
	total := 0.0
	if len(rows) > 0 {
		total, _ = rows[0]["total_spend"].(float64)
	}
	return c.JSON(http.StatusOK, map[string]any{"spend": total, "max_budget": s.ProxyBudget.Max})
}

// globalSpendLogs: GET /global/spend/logs[?api_key=<token or key>] → the spend per day of the
// last 30 days, [{"date", "spend"}] (with "api_key" when one is given; with "api_key" and
// "user" for an internal user, its own), oldest first.
func (s *Server) globalSpendLogs(c echo.Context) error {
	token := ""
	if k := c.QueryParam("api_key"); k != "" {
		token = mgmt.TokenOf(k)
	}
	var rows []map[string]any
	var err error
	switch uid := ownUser(c); {
	case uid != "":
		rows, err = s.report(c, `SELECT start_time::date AS date, sum(spend)::float8 AS spend, api_key, user_id AS "user" FROM gateway.spend_logs
			WHERE `+last30+` AND user_id = $1 AND ($2 = '' OR api_key = $2) GROUP BY 1, api_key, user_id ORDER BY 1`, uid, token)
	case token != "":
		rows, err = s.report(c, `SELECT start_time::date AS date, sum(spend)::float8 AS spend, api_key FROM gateway.spend_logs
			WHERE `+last30+` AND api_key = $1 GROUP BY 1, api_key ORDER BY 1`, token)
	default:
		rows, err = s.report(c, `SELECT start_time::date AS date, sum(spend)::float8 AS spend FROM gateway.spend_logs WHERE `+last30+` GROUP BY 1 ORDER BY 1`)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// globalSpendKeys: GET /global/spend/keys[?limit=n] → the keys by spend over the last 30 days,
// [{"api_key", "key_alias", "key_name", "total_spend"}], highest first (an internal user: its
// own user's, top 10). limit < 1 → 422 {"error": "Invalid limit: ..."}.
func (s *Server) globalSpendKeys(c echo.Context) error {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			why := "Limit must be greater than 0"
			switch {
			case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-"):
				why = fmt.Sprintf("Limit is too large: at most %d", math.MaxInt)
			case errors.Is(err, strconv.ErrSyntax):
				why = "Limit must be a valid integer"
			}
			return &Error{Status: http.StatusUnprocessableEntity, Type: "invalid_request_error",
				Message: "Invalid limit: " + v + ", error: " + why, style: styleDetail}
		}
		limit = n
	}
	uid := ownUser(c)
	if uid != "" {
		limit = 10
	}
	rows, err := s.report(c, `SELECT l.api_key, k.key_alias, NULL::text AS key_name, sum(l.spend)::float8 AS total_spend
		FROM gateway.spend_logs l LEFT JOIN gateway.api_keys k ON k.token = l.api_key
		WHERE ($1 <> '' OR l.`+last30+`) AND ($1 = '' OR l.user_id = $1)
		GROUP BY l.api_key, k.key_alias ORDER BY total_spend DESC LIMIT CASE WHEN $2 > 0 THEN $2 END`, uid, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// globalSpendTeams: GET /global/spend/teams → the daily spend per team over the last 30 days,
// as LiteLLM's admin UI reads it: {"daily_spend": [{"date", "<team alias>": USD, ...}],
// "teams": [aliases], "total_spend_per_team": [{"team_id": alias, "total_spend"}] (top 10)}.
// A team without alias, or a call without team, counts as "Unassigned"; amounts are rounded to
// cents as LiteLLM rounds them.
func (s *Server) globalSpendTeams(c echo.Context) error {
	rows, err := s.report(c, `SELECT t.team_alias, l.start_time::date AS spend_date, sum(l.spend)::float8 AS total_spend
		FROM gateway.spend_logs l LEFT JOIN gateway.teams t ON t.team_id = l.team_id
		WHERE l.`+last30+` GROUP BY t.team_alias, 2 ORDER BY 2`)
	if err != nil {
		return err
	}
	byDate := map[string]map[string]any{}
	var dates []string
	teams := map[string]bool{}
	total := map[string]float64{}
	for _, r := range rows {
		d, _ := r["spend_date"].(string)
		alias, _ := r["team_alias"].(string)
		if alias == "" {
			alias = "Unassigned"
		}
		teams[alias] = true
		v, _ := r["total_spend"].(float64)
		v = roundCents(v)
		if byDate[d] == nil {
			byDate[d] = map[string]any{"date": d}
			dates = append(dates, d)
		}
		byDate[d][alias] = v
		total[alias] += v
	}
	daily := make([]map[string]any, 0, len(dates))
	for _, d := range dates {
		daily = append(daily, byDate[d])
	}
	names := make([]string, 0, len(teams))
	for n := range teams {
		names = append(names, n)
	}
	sort.Strings(names)
	byTotal := append([]string(nil), names...)
	sort.SliceStable(byTotal, func(i, j int) bool { return total[byTotal[i]] > total[byTotal[j]] })
	per := make([]map[string]any, 0, 10)
	for _, n := range byTotal {
		if len(per) == 10 {
			break
		}
		per = append(per, map[string]any{"team_id": n, "total_spend": total[n]})
	}
	return c.JSON(http.StatusOK, map[string]any{"daily_spend": daily, "teams": names, "total_spend_per_team": per})
}

func roundCents(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 2, 64), 64)
	return r
}

// globalSpendEndUsers: POST /global/spend/end_users {"api_key"?, "startTime"?, "endTime"?}
// (LiteLLM GlobalEndUsersSpend; the body is optional; times default to the last 30 days) →
// the top 100 end users by spend, [{"end_user", "total_count", "total_spend"}].
func (s *Server) globalSpendEndUsers(c echo.Context) error {
	var req struct {
		APIKey    *string `json:"api_key"`
		StartTime *string `json:"startTime"`
		EndTime   *string `json:"endTime"`
	}
	if c.Request().ContentLength != 0 {
		if err := decodeStrict(c, &req); err != nil {
			return err
		}
	}
	// a time is YYYY-MM-DD or RFC 3339; anything else a 400 naming the field (parseDate)
	end := time.Now()
	if req.EndTime != nil && *req.EndTime != "" {
		t, err := parseDate(*req.EndTime, "endTime", false)
		if err != nil {
			return err
		}
		end = t
	}
	start := end.AddDate(0, 0, -30)
	if req.StartTime != nil && *req.StartTime != "" {
		t, err := parseDate(*req.StartTime, "startTime", false)
		if err != nil {
			return err
		}
		start = t
	}
	token := ""
	if req.APIKey != nil && *req.APIKey != "" {
		token = mgmt.TokenOf(*req.APIKey)
	}
	rows, err := s.report(c, `SELECT end_user, count(*) AS total_count, sum(spend)::float8 AS total_spend FROM gateway.spend_logs
		WHERE start_time >= $1 AND start_time < $2 AND ($3 = '' OR api_key = $3) AND ($4 = '' OR user_id = $4)
		GROUP BY end_user ORDER BY total_spend DESC LIMIT 100`, start, end, token, ownUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// globalSpendModels: GET /global/spend/models[?limit=10] → the models (groups asked for) by
// spend over the last 30 days, [{"model", "total_spend"}] ("total_tokens" too for an
// internal user, its own).
func (s *Server) globalSpendModels(c echo.Context) error {
	limit, err := queryInt(c, "limit", 10, 1, 100000)
	if err != nil {
		return err
	}
	var rows []map[string]any
	if uid := ownUser(c); uid != "" {
		rows, err = s.report(c, `SELECT model, sum(spend)::float8 AS total_spend, sum(total_tokens) AS total_tokens FROM gateway.spend_logs
			WHERE user_id = $1 GROUP BY model ORDER BY total_spend DESC LIMIT $2`, uid, limit)
	} else {
		rows, err = s.report(c, `SELECT model, sum(spend)::float8 AS total_spend FROM gateway.spend_logs
			WHERE `+last30+` AND model <> '' GROUP BY model ORDER BY total_spend DESC LIMIT $1`, limit)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// globalSpendProvider: GET /global/spend/provider?start_date=&end_date= → the spend per
// provider of the deployments that served the calls, [{"provider", "spend"}] (the model_id's
// deployment as this replica holds it; a deployment no longer known is left out, as LiteLLM's).
func (s *Server) globalSpendProvider(c echo.Context) error {
	start, end, err := reportDates(c)
	if err != nil {
		return err
	}
	rows, err := s.report(c, `SELECT model_id, sum(spend)::float8 AS spend FROM gateway.spend_logs
		WHERE start_time BETWEEN $1::date AND $2::date AND length(model_id) > 0 AND ($3 = '' OR user_id = $3) GROUP BY model_id`,
		start, end, ownUser(c))
	if err != nil {
		return err
	}
	byProvider := map[string]float64{}
	var order []string
	for _, r := range rows {
		id, _ := r["model_id"].(string)
		if s.Router == nil {
			continue
		}
		e, ok := s.Router.Models().Load().ByID(id)
		if !ok || e.Value.Deployment == nil {
			continue
		}
		p := e.Value.Provider
		if _, seen := byProvider[p]; !seen {
			order = append(order, p)
		}
		v, _ := r["spend"].(float64)
		byProvider[p] += v
	}
	out := make([]map[string]any, 0, len(order))
	for _, p := range order {
		out = append(out, map[string]any{"provider": p, "spend": byProvider[p]})
	}
	return c.JSON(http.StatusOK, out)
}

// globalSpendReport: GET /global/spend/report?start_date=&end_date=&group_by=team|customer|
// api_key[&api_key=|&internal_user_id=] — LiteLLM's spend report, its queries' shapes and
// dates (start_time BETWEEN start_date AND end_date, both midnight):
//   - api_key or internal_user_id given, or group_by=api_key: [{"api_key", "total_cost",
//     "total_input_tokens", "total_output_tokens", "model_details": [{"model", "total_cost",
//     "total_input_tokens", "total_output_tokens"}]}], highest cost first;
//   - group_by=team (default): [{"group_by_day", "teams": [{"team_name" (alias, else
//     "Unassigned Team"), "total_spend", "metadata": [{"model", "api_key", "spend",
//     "total_tokens"}]}]}] by day;
//   - group_by=customer: the same with "customers": [{"customer", "total_spend", "metadata"}].
func (s *Server) globalSpendReport(c echo.Context) error {
	start, end, err := reportDates(c)
	if err != nil {
		return err
	}
	groupBy := c.QueryParam("group_by")
	if groupBy == "" {
		groupBy = "team"
	}
	if groupBy != "team" && groupBy != "customer" && groupBy != "api_key" {
		return badRequest("group_by must be one of team, customer, api_key, got %q", groupBy)
	}
	token, userID := "", c.QueryParam("internal_user_id")
	if k := c.QueryParam("api_key"); k != "" {
		token = mgmt.TokenOf(k)
	}
	var rows []map[string]any
	switch {
	case token != "" || userID != "" || groupBy == "api_key":
		rows, err = s.report(c, `WITH by_model AS (
				SELECT api_key, model, sum(spend) AS model_cost, sum(prompt_tokens) AS model_input_tokens, sum(completion_tokens) AS model_output_tokens
				FROM gateway.spend_logs WHERE start_time BETWEEN $1::date AND $2::date AND ($3 = '' OR api_key = $3) AND ($4 = '' OR user_id = $4)
				GROUP BY api_key, model)
			SELECT api_key, sum(model_cost)::float8 AS total_cost, sum(model_input_tokens) AS total_input_tokens, sum(model_output_tokens) AS total_output_tokens,
				jsonb_agg(jsonb_build_object('model', model, 'total_cost', model_cost, 'total_input_tokens', model_input_tokens, 'total_output_tokens', model_output_tokens)) AS model_details
			FROM by_model GROUP BY api_key ORDER BY total_cost DESC`, start, end, token, userID)
	case groupBy == "team":
		rows, err = s.report(c, `WITH by_model AS (
				SELECT date_trunc('day', l.start_time) AS group_by_day, coalesce(t.team_alias, 'Unassigned Team') AS team_name, l.model, l.api_key,
					sum(l.spend) AS model_api_spend, sum(l.total_tokens) AS model_api_tokens
				FROM gateway.spend_logs l LEFT JOIN gateway.teams t ON l.team_id = t.team_id
				WHERE l.start_time BETWEEN $1::date AND $2::date GROUP BY 1, t.team_alias, l.model, l.api_key)
			SELECT group_by_day, jsonb_agg(jsonb_build_object('team_name', team_name, 'total_spend', total_spend, 'metadata', metadata)) AS teams
			FROM (SELECT group_by_day, team_name, sum(model_api_spend) AS total_spend,
					jsonb_agg(jsonb_build_object('model', model, 'api_key', api_key, 'spend', model_api_spend, 'total_tokens', model_api_tokens)) AS metadata
				FROM by_model GROUP BY group_by_day, team_name) agg
			GROUP BY group_by_day ORDER BY group_by_day`, start, end)
	default:
		rows, err = s.report(c, `WITH by_model AS (
				SELECT date_trunc('day', start_time) AS group_by_day, end_user AS customer, model, api_key,
					sum(spend) AS model_api_spend, sum(total_tokens) AS model_api_tokens
				FROM gateway.spend_logs WHERE start_time BETWEEN $1::date AND $2::date GROUP BY 1, end_user, model, api_key)
			SELECT group_by_day, jsonb_agg(jsonb_build_object('customer', customer, 'total_spend', total_spend, 'metadata', metadata)) AS customers
			FROM (SELECT group_by_day, customer, sum(model_api_spend) AS total_spend,
					jsonb_agg(jsonb_build_object('model', model, 'api_key', api_key, 'spend', model_api_spend, 'total_tokens', model_api_tokens)) AS metadata
				FROM by_model GROUP BY group_by_day, customer) agg
			GROUP BY group_by_day ORDER BY group_by_day`, start, end)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rows)
}

// globalSpendReset: POST /global/spend/reset → every key's and every team's spend is 0 (the
// spend logs are kept), as LiteLLM's; each replica's budget view follows at its next flush.
// → {"message": "Spend for all API Keys and Teams reset successfully", "status": "success"}.
func (s *Server) globalSpendReset(c echo.Context) error {
	st, err := s.reportStore(c)
	if err != nil {
		return err
	}
	if err := st.ResetKeyAndTeamSpend(c.Request().Context()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"message": "Spend for all API Keys and Teams reset successfully", "status": "success"})
}

// globalActivity: GET /global/activity?start_date=&end_date= → {"daily_data": [{"date":
// "Jan 02", "api_requests", "total_tokens"}], "sum_api_requests", "sum_total_tokens"}; with
// byModel (/global/activity/model) the same per model group, top 10 by requests:
// [{"model", "daily_data", "sum_api_requests", "sum_total_tokens"}]. Days from start_date to
// end_date inclusive (LiteLLM's BETWEEN $1::date AND $2::date + interval '1 day').
func (s *Server) globalActivity(byModel bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		start, end, err := reportDates(c)
		if err != nil {
			return err
		}
		rows, err := s.report(c, `SELECT model, to_char(date_trunc('day', start_time), 'Mon DD') AS date, date_trunc('day', start_time) AS day,
				count(*) AS api_requests, sum(total_tokens) AS total_tokens
			FROM gateway.spend_logs WHERE start_time BETWEEN $1::date AND $2::date + interval '1 day' AND ($3 = '' OR user_id = $3)
			GROUP BY model, 2, 3 ORDER BY 3`, start, end, ownUser(c))
		if err != nil {
			return err
		}
		type agg struct {
			daily           []map[string]any
			byDay           map[string]map[string]any
			requests, total float64
		}
		groups := map[string]*agg{}
		var order []string
		for _, r := range rows {
			key := ""
			if byModel {
				key, _ = r["model"].(string)
			}
			g := groups[key]
			if g == nil {
				g = &agg{byDay: map[string]map[string]any{}}
				groups[key] = g
				order = append(order, key)
			}
			d, _ := r["date"].(string)
			n, _ := r["api_requests"].(float64)
			tok, _ := r["total_tokens"].(float64)
			g.requests += n
			g.total += tok
			if e := g.byDay[d]; e != nil {
				e["api_requests"] = e["api_requests"].(float64) + n
				e["total_tokens"] = e["total_tokens"].(float64) + tok
				continue
			}
			e := map[string]any{"date": d, "api_requests": n, "total_tokens": tok}
			g.byDay[d] = e
			g.daily = append(g.daily, e)
		}
		if !byModel {
			g := groups[""]
			if g == nil {
				g = &agg{}
			}
			daily := g.daily
			if daily == nil {
				daily = []map[string]any{}
			}
			return c.JSON(http.StatusOK, map[string]any{"daily_data": daily, "sum_api_requests": g.requests, "sum_total_tokens": g.total})
		}
		sort.SliceStable(order, func(i, j int) bool { return groups[order[i]].requests > groups[order[j]].requests })
		if len(order) > 10 {
			order = order[:10]
		}
		out := make([]map[string]any, 0, len(order))
		for _, m := range order {
			g := groups[m]
			out = append(out, map[string]any{"model": m, "daily_data": g.daily, "sum_api_requests": g.requests, "sum_total_tokens": g.total})
		}
		return c.JSON(http.StatusOK, out)
	}
}

// globalAllEndUsers: GET /global/all_end_users → {"end_users": [every distinct end_user of the
// spend logs]}.
func (s *Server) globalAllEndUsers(c echo.Context) error {
	rows, err := s.report(c, `SELECT DISTINCT end_user FROM gateway.spend_logs ORDER BY end_user`)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(rows))
	for _, r := range rows {
		out = append(out, r["end_user"])
	}
	return c.JSON(http.StatusOK, map[string]any{"end_users": out})
}

// spendLogJSON is a spend log as LiteLLM's /spend/logs answers it (its LiteLLM_SpendLogs
// row): request_id is the answer's id the client saw (the call id when there is none: a
// failed call), call_id the call's x-litellm-call-id, and metadata carries LiteLLM's
// user_api_key_* keys.
func spendLogJSON(l mgmt.SpendLog) map[string]any {
	rid := l.RequestID
	if l.ResponseID != "" {
		rid = l.ResponseID
	}
	str := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	meta := map[string]any{
		"user_api_key":             l.APIKey,
		"user_api_key_alias":       str(l.KeyAlias),
		"user_api_key_team_id":     str(l.TeamID),
		"user_api_key_team_alias":  str(l.TeamAlias),
		"user_api_key_org_id":      str(l.OrganizationID),
		"user_api_key_user_id":     str(l.User),
		"user_api_key_end_user_id": str(l.EndUser),
		"user_api_key_project_id":  str(l.ProjectID),
		"status":                   l.Status,
		"litellm_call_id":          l.RequestID,
	}
	tags := l.RequestTags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{
		"request_id": rid, "call_id": l.RequestID, "call_type": l.CallType, "api_key": l.APIKey, "spend": l.Spend,
		"total_tokens": l.TotalTokens, "prompt_tokens": l.PromptTokens, "completion_tokens": l.CompletionTokens,
		"startTime": l.StartTime, "endTime": l.EndTime, "model": l.Model, "model_id": l.ModelID, "model_group": l.Model,
		"user": l.User, "team_id": l.TeamID, "organization_id": l.OrganizationID, "end_user": l.EndUser,
		"status": l.Status, "replica_id": l.ReplicaID, "metadata": meta, "request_tags": tags,
	}
}

// EnsureProxyBudget writes the proxy-wide budget's user (admin.EnsureProxyBudgetUser) and
// schedules its first budget reset when it has a budget_duration, at start-up; nothing without
// a proxy budget or a database.
func (s *Server) EnsureProxyBudget(ctx context.Context, duration string) error {
	if !s.ProxyBudget.Has || s.DB == nil {
		return nil
	}
	if err := s.mgmt.EnsureProxyBudgetUser(ctx, s.ProxyBudget.Max, duration); err != nil {
		return err
	}
	return s.DB.EnsureBudgetReset(ctx, mgmt.OwnerToken("user", mgmt.ProxyBudgetUser), s.ProxyBudget.Every)
}
