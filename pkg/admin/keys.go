package admin

// Virtual keys (LiteLLM /key/*): generate, update, block, regenerate, delete, read. Only a
// key's sha256 (keys.Hash) is stored; a key is answered once, by the write that makes it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/numbers"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

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

// KeyRequest is the body of /key/generate and /key/update, and their one list of accepted
// fields: any other member is a 400 naming it, nothing stored (decodeStrict, API.md "Keys").
type KeyRequest struct {
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
	// Spend sets the key's spend total (USD, current budget period; LiteLLM "spend").
	Spend optional `json:"spend"`

	// Extra are the LiteLLM fields without a column (pkg/catalogue: aliases, tags,
	// send_invite_email, ...), checked by the decoder; merged into litellm_fields (sql/011).
	Extra map[string]json.RawMessage `json:"-"`
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
		return nil, invalidf("%s must be a non-negative integer or null, got %s", field, o.raw)
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || v < 0 || (field == "max_parallel_requests" && v > math.MaxInt32) {
		return nil, invalidf("%s must be a non-negative integer or null, got %s", field, o.raw)
	}
	return v, nil
}

// keyValues turns a key request into column values; budgetChange reports whether
// budget_duration was given (so budget_reset_at moves), with its new value (0: none).
func keyValues(req KeyRequest) (store.Values, bool, time.Duration, error) {
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
			return nil, false, 0, invalidf("%v", err)
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
	if len(req.Extra) > 0 {
		b, err := json.Marshal(req.Extra)
		if err != nil {
			return nil, false, 0, err
		}
		v["litellm_fields"] = store.JSONMerge(b)
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
			if numbers.OutOfRange(req.MaxBudget.raw) {
				return nil, false, 0, invalidf("%s", numbers.RangeError("max_budget", req.MaxBudget.raw))
			}
			if err := json.Unmarshal(req.MaxBudget.raw, &f); err != nil || f < 0 || math.IsInf(f, 0) {
				return nil, false, 0, invalidf("max_budget must be a non-negative number (USD) or null, got %s", req.MaxBudget.raw)
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
				return nil, false, 0, invalidf("budget_duration must be a duration string like 30s, 1h, 1d, 30d or 1mo, got %s", req.BudgetDuration.raw)
			}
			if str == "" {
				v["budget_duration"] = nil
			} else {
				d, err := keys.ParseDuration(str)
				if err != nil {
					return nil, false, 0, invalidf("%s", keys.DurationError("budget_duration", err))
				}
				every = d
				v["budget_duration"] = str
			}
		}
	}
	return v, req.BudgetDuration.set, every, nil
}

// spendValue reads a spend field (USD >= 0; null or absent: not set).
func spendValue(o optional) (*float64, error) {
	if !o.set || o.null() {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(o.raw, &f); err != nil || f < 0 || math.IsInf(f, 0) {
		return nil, invalidf("spend must be a non-negative number (USD) or null, got %s", o.raw)
	}
	return &f, nil
}

// tokenOf accepts either a key ("sk-...") or its stored sha256 token.
func tokenOf(k string) string {
	if len(k) == 64 && !hasPrefix(k, "sk-") {
		return k
	}
	return keys.Hash(k)
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func customKey(k string) error {
	if !strings.HasPrefix(k, "sk-") {
		return invalidf("key: a custom key must start with 'sk-'")
	}
	if len(k) < 4 || strings.TrimSpace(k) != k {
		return invalidf("key: a custom key needs characters after 'sk-' and no surrounding spaces")
	}
	return nil
}

func redact(k string) string {
	if len(k) <= 8 {
		return "****"
	}
	return k[:5] + "****" + k[len(k)-4:]
}

// checkKeyOwners checks a key write's team_id and user_id (LiteLLM /key/generate): the team and
// the user must exist (Invalid naming the id), and a team key's models must be within the
// team's models (Invalid naming the models the team does not allow). On update (upd non-nil) the stored
// key's team and models are used for whichever the write does not change.
func (a *Admin) checkKeyOwners(ctx context.Context, vals store.Values, upd *KeyRequest) error {
	teamID, _ := vals["team_id"].(string)
	models, hasModels := vals["models"].([]string)
	if upd != nil && (teamID != "" || hasModels) {
		row, err := a.st.Get(ctx, store.Key, tokenOf(upd.Key))
		if errors.Is(err, store.ErrNotFound) {
			return notFound("Key not found")
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
	if uid, _ := vals["user_id"].(string); uid != "" && upd != nil {
		// on /key/generate a user_id not yet stored is created with the key (GenerateKey)
		if _, err := a.st.Get(ctx, store.User, uid); errors.Is(err, store.ErrNotFound) {
			return invalidf("user_id: user %s does not exist; create it with /user/new", uid)
		} else if err != nil {
			return err
		}
	}
	if teamID == "" {
		return nil
	}
	row, err := a.st.Get(ctx, store.Team, teamID)
	if errors.Is(err, store.ErrNotFound) {
		return invalidf("team_id: team %s does not exist; create it with /team/new", teamID)
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
		if !a.teamAllows(team, m) {
			outside = append(outside, m)
		}
	}
	if len(models) == 0 || contains(models, keys.AllProxyModels) {
		outside = nil // a key without its own list gets the team's models
	}
	if len(outside) > 0 {
		return invalidf("Model not in team's allowed models: %s. Team %s can only access models=%s", pyList(outside), teamID, pyList(team.Models))
	}
	return nil
}

// teamAllows reports whether the team allows name, a model group or an access group name.
func (a *Admin) teamAllows(t *accounts.Team, name string) bool {
	if keys.ListAllows(t.Models, name, groupAccess(a.router.Models().Load().ByName(name))) {
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

// groupAccess iterates the access groups of a model group's deployments.
func groupAccess(group []*registry.Entry[*router.Deployment]) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, e := range group {
			for _, g := range e.Value.AccessGroups {
				if !yield(g) {
					return
				}
			}
		}
	}
}

// pyList renders a list as Python prints it (['a', 'b']), as LiteLLM's messages do.
func pyList(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	b.WriteByte(']')
	return b.String()
}

// TokenOf is the stored token of k: k itself when it is a token (64 hex characters, no
// "sk-"), else keys.Hash(k).
func TokenOf(k string) string { return tokenOf(k) }

// KeyResult is a key a write made or changed: its row, the key as the caller gave or got it,
// and its spend row (nil: none known).
type KeyResult struct {
	Row   store.Row
	Key   string
	Spend *store.KeySpend
}

const keyNotFound = "Key not found"

// keySpendOf reads the spend row of token (nil when there is none).
func (a *Admin) keySpendOf(ctx context.Context, token string) (*store.KeySpend, error) {
	got, err := a.st.GetKeySpend(ctx, []string{token})
	if err != nil {
		return nil, err
	}
	if ks, ok := got[token]; ok {
		return &ks, nil
	}
	return nil, nil
}

// GenerateKey is /key/generate: a new key (req.Key when given, which must start with "sk-";
// else a random one), only its sha256 stored, with its budget reset scheduled when
// budget_duration is given. A user_id no user has yet is created with the key, in the same
// transaction (role internal_user; LiteLLM's generate_key_helper_fn upserts the key's user). Errors: Invalid (a field, an owner that does not exist, models
// outside the team's), NotFound, Conflict (the key exists).
func (a *Admin) GenerateKey(ctx context.Context, req KeyRequest) (KeyResult, error) {
	vals, budgetSet, every, err := keyValues(req)
	if err != nil {
		return KeyResult{}, err
	}
	if err := a.checkKeyOwners(ctx, vals, nil); err != nil {
		return KeyResult{}, err
	}
	if err := a.teamMemberKeyDuration(ctx, req, vals); err != nil {
		return KeyResult{}, err
	}
	if err := a.keyOrganization(ctx, req, vals, nil); err != nil {
		return KeyResult{}, err
	}
	key := req.Key
	if key == "" {
		key = keys.Generate()
	} else if err := customKey(key); err != nil {
		return KeyResult{}, err
	}
	spend, err := spendValue(req.Spend)
	if err != nil {
		return KeyResult{}, err
	}
	vals["token"] = keys.Hash(key)
	var row store.Row
	var resetAt *time.Time
	err = a.Write(ctx, func(w *Writer) error {
		var err error
		if uid, _ := vals["user_id"].(string); uid != "" {
			// a user_id not yet stored becomes a user (internal_user), as LiteLLM's
			// /key/generate creates the user row of the key's user_id; race-safe as members
			if _, _, err := ensureUsers(ctx, w, []accounts.Member{{UserID: uid}}); err != nil {
				return err
			}
		}
		if row, err = w.Insert(ctx, store.Key, vals); err != nil {
			return err
		}
		if budgetSet && every > 0 {
			if resetAt, err = w.SetBudgetReset(ctx, row.ID, every); err != nil {
				return err
			}
		}
		if spend != nil {
			return w.SetSpend(ctx, row.ID, *spend)
		}
		return nil
	})
	if err != nil {
		return KeyResult{}, err
	}
	ks := &store.KeySpend{BudgetResetAt: resetAt}
	if spend != nil {
		ks.Spend = *spend
	}
	return KeyResult{Row: row, Key: key, Spend: ks}, nil
}

// UpdateKey is /key/update: the given fields of req.Key (a key or its token) change.
// Errors: Invalid ("key is required", "nothing to update: ...", a field, owners), NotFound
// "Key not found".
func (a *Admin) UpdateKey(ctx context.Context, req KeyRequest) (KeyResult, error) {
	if req.Key == "" {
		return KeyResult{}, invalid("key", "key is required")
	}
	vals, budgetSet, every, err := keyValues(req)
	if err != nil {
		return KeyResult{}, err
	}
	spend, err := spendValue(req.Spend)
	if err != nil {
		return KeyResult{}, err
	}
	if len(vals) == 0 && spend == nil {
		return KeyResult{}, invalidf("nothing to update: give models, key_alias, duration, metadata, blocked, rpm_limit, tpm_limit, max_parallel_requests, max_budget, budget_duration or spend")
	}
	if err := a.checkKeyOwners(ctx, vals, &req); err != nil {
		return KeyResult{}, err
	}
	if _, ok := req.Extra["organization_id"]; ok {
		cur, err := a.st.Get(ctx, store.Key, tokenOf(req.Key))
		if errors.Is(err, store.ErrNotFound) {
			return KeyResult{}, notFound("Key not found")
		} else if err != nil {
			return KeyResult{}, err
		}
		k, err := keys.BuildRow(cur)
		if err != nil {
			return KeyResult{}, err
		}
		if err := a.keyOrganization(ctx, req, vals, k); err != nil {
			return KeyResult{}, err
		}
	}
	return a.updateKey(ctx, req.Key, vals, budgetSet, every, spend)
}

// BlockKey is /key/block and /key/unblock: the key is refused (or served again) on every
// replica as soon as the change is applied there. Errors: Invalid "key is required", NotFound.
func (a *Admin) BlockKey(ctx context.Context, key string, blocked bool) (KeyResult, error) {
	if key == "" {
		return KeyResult{}, invalid("key", "key is required")
	}
	return a.updateKey(ctx, key, store.Values{"blocked": blocked}, false, 0, nil)
}

// updateKey writes vals to the key (and moves its budget reset when budgetSet, and sets its
// spend total when spend is not nil).
func (a *Admin) updateKey(ctx context.Context, key string, vals store.Values, budgetSet bool, every time.Duration, spend *float64) (KeyResult, error) {
	token := tokenOf(key)
	var row store.Row
	var resetAt *time.Time
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		if len(vals) == 0 {
			row, err = w.GetForUpdate(ctx, store.Key, token)
		} else {
			row, err = w.Update(ctx, store.Key, token, vals)
		}
		if err != nil {
			return err
		}
		if budgetSet {
			if resetAt, err = w.SetBudgetReset(ctx, token, every); err != nil {
				return err
			}
		}
		if spend != nil {
			return w.SetSpend(ctx, token, *spend)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return KeyResult{}, notFound(keyNotFound)
	}
	if err != nil {
		return KeyResult{}, err
	}
	ks, err := a.keySpendOf(ctx, token)
	if err != nil {
		ks = &store.KeySpend{BudgetResetAt: resetAt}
	}
	return KeyResult{Row: row, Key: key, Spend: ks}, nil
}

// RegenerateKey is /key/regenerate: the key gets a new value (newKey when given, which must
// start with "sk-"; else a random one); its settings and spend move with it and the old value
// is refused on every replica (the trigger logs the old token deleted at its version + 1, a
// primary-key change, and the write path applies that tombstone). Errors: Invalid, NotFound.
func (a *Admin) RegenerateKey(ctx context.Context, key, newKey string) (KeyResult, error) {
	if key == "" {
		return KeyResult{}, invalid("key", "key is required")
	}
	if newKey == "" {
		newKey = keys.Generate()
	} else if err := customKey(newKey); err != nil {
		return KeyResult{}, err
	}
	oldToken, newToken := tokenOf(key), keys.Hash(newKey)
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		old, err := w.Get(ctx, store.Key, oldToken)
		if err != nil {
			return err
		}
		row, err = w.regenerate(ctx, old, newToken, nil)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return KeyResult{}, notFound(keyNotFound)
	}
	if err != nil {
		return KeyResult{}, err
	}
	ks, _ := a.keySpendOf(ctx, newToken)
	return KeyResult{Row: row, Key: newKey, Spend: ks}, nil
}

// regenerate moves the key row old to newToken (vals: more columns written by the same
// statement, nil: none) with its spend: the trigger logs the old token deleted at its
// version + 1 (a primary-key change), recorded here so the write path applies that tombstone
// and the old value is refused on every replica. Errors: the store's.
func (w *Writer) regenerate(ctx context.Context, old store.Row, newToken string, vals store.Values) (store.Row, error) {
	set := store.Values{"token": newToken}
	for k, v := range vals {
		set[k] = v
	}
	row, err := w.Update(ctx, store.Key, old.ID, set)
	if err != nil {
		return store.Row{}, err
	}
	w.Deleted(store.Key, old.ID, old.Version+1)
	return row, w.MoveKeySpend(ctx, old.ID, newToken)
}

// DeleteKeys is /key/delete: all or nothing, an unknown key (NotFound "Key not found:
// <redacted key>") fails the call before anything is deleted. Errors: Invalid when list is empty.
func (a *Admin) DeleteKeys(ctx context.Context, list []string) error {
	if len(list) == 0 {
		return invalidf("keys is required: a non-empty list of keys to delete")
	}
	return a.Write(ctx, func(w *Writer) error {
		for _, k := range list {
			if _, err := w.Get(ctx, store.Key, tokenOf(k)); errors.Is(err, store.ErrNotFound) {
				return notFound("Key not found: %s", redact(k))
			} else if err != nil {
				return err
			}
		}
		for _, k := range list {
			// listed twice, or deleted meanwhile: gone all the same
			if _, err := w.Delete(ctx, store.Key, tokenOf(k)); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
}

// Key reads the key k (a key or its token) and its spend row (nil: none). NotFound "Key not
// found".
func (a *Admin) Key(ctx context.Context, k string) (store.Row, *store.KeySpend, error) {
	row, err := a.st.Get(ctx, store.Key, tokenOf(k))
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, nil, notFound(keyNotFound)
	}
	if err != nil {
		return store.Row{}, nil, err
	}
	ks, err := a.keySpendOf(ctx, row.ID)
	if err != nil {
		return store.Row{}, nil, err
	}
	return row, ks, nil
}

// Keys reads one page of keys (1-based page of size rows, by creation) with the total count
// and the spend rows of the page's keys by token.
func (a *Admin) Keys(ctx context.Context, page, size int) ([]store.Row, int, map[string]store.KeySpend, error) {
	rows, total, err := a.st.ListPage(ctx, store.Key, page, size)
	if err != nil {
		return nil, 0, nil, err
	}
	tokens := make([]string, len(rows))
	for i, r := range rows {
		tokens[i] = r.ID
	}
	spends, err := a.st.GetKeySpend(ctx, tokens)
	if err != nil {
		return nil, 0, nil, err
	}
	return rows, total, spends, nil
}
