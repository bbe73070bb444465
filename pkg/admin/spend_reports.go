package admin

import (
	"context"
	"time"

	"lockstep/pkg/store"
)

// SpendLogFilter selects the spend logs /spend/logs answers (store.SpendLogFilter).
type SpendLogFilter = store.SpendLogFilter

// ProxyBudgetUser is the user whose spend is every call's, under the proxy-wide budget
// (LiteLLM's litellm_proxy_budget_name).
const ProxyBudgetUser = store.ProxyBudgetUser

// SpendReports are the spend routes' reads and writes beyond a spend log page (pkg/api
// spend_reports.go; implemented by *store.Store through PG).
type SpendReports interface {
	// SpendLogsWhere reads the spend logs f selects, newest first.
	SpendLogsWhere(ctx context.Context, f SpendLogFilter) ([]SpendLog, error)
	// SpendReport runs one aggregation over gateway.spend_logs, rows as JSON objects.
	SpendReport(ctx context.Context, query string, args ...any) ([]map[string]any, error)
	// ResetKeyAndTeamSpend sets every key's and team's spend to 0 (/global/spend/reset).
	ResetKeyAndTeamSpend(ctx context.Context) error
	// EnsureBudgetReset schedules a key_spend token's first budget reset unless one is set.
	EnsureBudgetReset(ctx context.Context, token string, every time.Duration) error
}
