package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"lockstep/pkg/store"
)

// fakeStore is an in-memory Store: one map of rows per table (row_to_json-like data), a
// global version sequence, transactions that copy on begin and publish on commit.
type fakeStore struct {
	mu     sync.Mutex
	tables map[store.ObjectType]map[string]map[string]any
	seq    int64
	// failCommit makes the next Tx fail after fn succeeded (a lost commit).
	failCommit error
	// failOn makes the named operation ("insert", "update", "delete", "get", "list", "lock")
	// of the given type fail with the error.
	failOn map[string]error
	// order of ids in List: creation order
	created map[string]int64
	txs     int
	spend   map[string]store.KeySpend
	// shareLocks are the rows GetForShare locked ("type id"), in order.
	shareLocks []string
}

func newFakeStore() *fakeStore {
	return &fakeStore{tables: map[store.ObjectType]map[string]map[string]any{}, failOn: map[string]error{}, created: map[string]int64{}}
}

func pkOf(typ store.ObjectType) string {
	for _, t := range store.Tables {
		if t.Type == typ {
			return t.PK
		}
	}
	panic("unknown type " + string(typ))
}

type fakeTx struct {
	f      *fakeStore
	tables map[store.ObjectType]map[string]map[string]any
}

func copyTables(in map[store.ObjectType]map[string]map[string]any) map[store.ObjectType]map[string]map[string]any {
	out := map[store.ObjectType]map[string]map[string]any{}
	for t, rows := range in {
		m := map[string]map[string]any{}
		for id, r := range rows {
			c := map[string]any{}
			for k, v := range r {
				c[k] = v
			}
			m[id] = c
		}
		out[t] = m
	}
	return out
}

func (f *fakeStore) Tx(ctx context.Context, fn func(Tx) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txs++
	tx := &fakeTx{f: f, tables: copyTables(f.tables)}
	if err := fn(tx); err != nil {
		return err
	}
	if err := f.failCommit; err != nil {
		f.failCommit = nil
		return err
	}
	f.tables = tx.tables
	return nil
}

func (f *fakeStore) Get(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return (&fakeTx{f: f, tables: f.tables}).Get(ctx, typ, id)
}

func (f *fakeStore) List(ctx context.Context, typ store.ObjectType) ([]store.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return (&fakeTx{f: f, tables: f.tables}).List(ctx, typ)
}

// put seeds a row outside any transaction (as psql would).
func (f *fakeStore) put(typ store.ObjectType, vals store.Values) store.Row {
	f.mu.Lock()
	defer f.mu.Unlock()
	row, err := (&fakeTx{f: f, tables: f.tables}).Insert(context.Background(), typ, vals)
	if err != nil {
		panic(err)
	}
	return row
}

func (t *fakeTx) fail(op string, typ store.ObjectType) error {
	return t.f.failOn[op+" "+string(typ)]
}

func (t *fakeTx) row(typ store.ObjectType, r map[string]any) store.Row {
	m := map[string]any{}
	for k, v := range r {
		if b, ok := v.([]byte); ok {
			v = json.RawMessage(b)
		}
		if b, ok := v.(store.JSONMerge); ok { // as written; the fake does not merge
			v = json.RawMessage(b)
		}
		m[k] = v
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return store.Row{Type: typ, ID: fmt.Sprint(r[pkOf(typ)]), Version: r["version"].(int64), Data: data}
}

func (t *fakeTx) Get(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	if err := t.fail("get", typ); err != nil {
		return store.Row{}, err
	}
	r, ok := t.tables[typ][id]
	if !ok {
		return store.Row{}, fmt.Errorf("get %s: %w", typ, store.ErrNotFound)
	}
	return t.row(typ, r), nil
}

func (t *fakeTx) List(ctx context.Context, typ store.ObjectType) ([]store.Row, error) {
	if err := t.fail("list", typ); err != nil {
		return nil, err
	}
	var out []store.Row
	for _, r := range t.tables[typ] {
		out = append(out, t.row(typ, r))
	}
	sort.Slice(out, func(i, j int) bool {
		return t.f.created[string(typ)+out[i].ID] < t.f.created[string(typ)+out[j].ID]
	})
	return out, nil
}

func (t *fakeTx) Insert(ctx context.Context, typ store.ObjectType, vals store.Values) (store.Row, error) {
	if err := t.fail("insert", typ); err != nil {
		return store.Row{}, err
	}
	id := fmt.Sprint(vals[pkOf(typ)])
	if _, ok := t.tables[typ][id]; ok {
		return store.Row{}, fmt.Errorf("insert %s: %w", typ, store.ErrConflict)
	}
	if t.tables[typ] == nil {
		t.tables[typ] = map[string]map[string]any{}
	}
	t.f.seq++
	r := map[string]any{"version": t.f.seq}
	for k, v := range vals {
		r[k] = v
	}
	t.tables[typ][id] = r
	t.f.created[string(typ)+id] = t.f.seq
	return t.row(typ, r), nil
}

func (t *fakeTx) Update(ctx context.Context, typ store.ObjectType, id string, vals store.Values) (store.Row, error) {
	if err := t.fail("update", typ); err != nil {
		return store.Row{}, err
	}
	r, ok := t.tables[typ][id]
	if !ok {
		return store.Row{}, fmt.Errorf("update %s: %w", typ, store.ErrNotFound)
	}
	t.f.seq++
	r["version"] = t.f.seq
	for k, v := range vals {
		r[k] = v
	}
	if nid := fmt.Sprint(r[pkOf(typ)]); nid != id { // a primary-key change
		delete(t.tables[typ], id)
		t.tables[typ][nid] = r
		t.f.created[string(typ)+nid] = t.f.created[string(typ)+id]
	}
	return t.row(typ, r), nil
}

func (t *fakeTx) Delete(ctx context.Context, typ store.ObjectType, id string) (int64, error) {
	if err := t.fail("delete", typ); err != nil {
		return 0, err
	}
	r, ok := t.tables[typ][id]
	if !ok {
		return 0, fmt.Errorf("delete %s: %w", typ, store.ErrNotFound)
	}
	delete(t.tables[typ], id)
	return r["version"].(int64) + 1, nil
}

func (t *fakeTx) LockName(ctx context.Context, name string) error { return nil }

func (t *fakeTx) TryLockName(ctx context.Context, name string) (bool, error) { return true, nil }

// DueKeyRotations is not modelled by the fake (the rotation job is tested on Postgres,
// itest TestKeyRotation*).
func (t *fakeTx) DueKeyRotations(ctx context.Context, now string, limit int) ([]store.Row, error) {
	return nil, errors.New("fake store: DueKeyRotations is not modelled")
}

func (t *fakeTx) LockTable(ctx context.Context, typ store.ObjectType) error {
	return t.fail("lock", typ)
}

var errDown = errors.New("database unavailable (fake)")

// fakeSink records every Apply.
type fakeSink struct {
	typ     store.ObjectType
	applies []applied
}

type applied struct {
	rows   []store.Row
	absent map[string]int64
}

func (s *fakeSink) Type() store.ObjectType { return s.typ }
func (s *fakeSink) Apply(rows []store.Row, absent map[string]int64) int {
	s.applies = append(s.applies, applied{rows, absent})
	return len(rows) + len(absent)
}

func (f *fakeStore) spendRows() map[string]store.KeySpend {
	if f.spend == nil {
		f.spend = map[string]store.KeySpend{}
	}
	return f.spend
}

func (f *fakeStore) ListPage(ctx context.Context, typ store.ObjectType, page, size int) ([]store.Row, int, error) {
	rows, err := f.List(ctx, typ)
	if err != nil {
		return nil, 0, err
	}
	lo := min((page-1)*size, len(rows))
	hi := min(lo+size, len(rows))
	return rows[lo:hi], len(rows), nil
}

func (f *fakeStore) GetKeySpend(ctx context.Context, tokens []string) (map[string]store.KeySpend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failOn["spend"]; err != nil {
		return nil, err
	}
	out := map[string]store.KeySpend{}
	for _, t := range tokens {
		if ks, ok := f.spendRows()[t]; ok {
			out[t] = ks
		}
	}
	return out, nil
}

func (t *fakeTx) SetBudgetReset(ctx context.Context, token string, every time.Duration) (*time.Time, error) {
	if err := t.fail("reset", ""); err != nil {
		return nil, err
	}
	ks := t.f.spendRows()[token]
	ks.BudgetResetAt = nil
	if every > 0 {
		at := time.Unix(1700000000, 0).Add(every)
		ks.BudgetResetAt = &at
	}
	t.f.spendRows()[token] = ks
	return ks.BudgetResetAt, nil
}

func (t *fakeTx) SetBudgetResetAt(ctx context.Context, token string, at time.Time) error {
	ks := t.f.spendRows()[token]
	ks.BudgetResetAt = &at
	t.f.spendRows()[token] = ks
	return nil
}

func (t *fakeTx) SetSpend(ctx context.Context, token string, spend float64) error {
	ks := t.f.spendRows()[token]
	ks.Spend = spend
	t.f.spendRows()[token] = ks
	return nil
}

func (t *fakeTx) MoveKeySpend(ctx context.Context, from, to string) error {
	if ks, ok := t.f.spendRows()[from]; ok {
		delete(t.f.spendRows(), from)
		t.f.spendRows()[to] = ks
	}
	return nil
}

func (t *fakeTx) GetForUpdate(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	return t.Get(ctx, typ, id)
}

// GetForShare is Get, recording the lock (shareLocks "type id").
func (t *fakeTx) GetForShare(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	t.f.shareLocks = append(t.f.shareLocks, string(typ)+" "+id)
	return t.Get(ctx, typ, id)
}

func (t *fakeTx) ListBy(ctx context.Context, typ store.ObjectType, column, value string) ([]store.Row, error) {
	if err := t.fail("listby", typ); err != nil {
		return nil, err
	}
	all, err := t.List(ctx, typ)
	if err != nil {
		return nil, err
	}
	var out []store.Row
	for _, r := range all {
		if fmt.Sprint(t.tables[typ][r.ID][column]) == value {
			out = append(out, r)
		}
	}
	return out, nil
}

func (t *fakeTx) DeleteBy(ctx context.Context, typ store.ObjectType, column, value string) (map[string]int64, error) {
	rows, err := t.ListBy(ctx, typ, column, value)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		v, err := t.Delete(ctx, typ, r.ID)
		if err != nil {
			return nil, err
		}
		out[r.ID] = v
	}
	return out, nil
}

func (f *fakeStore) ListBy(ctx context.Context, typ store.ObjectType, column, value string) ([]store.Row, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return (&fakeTx{f: f, tables: f.tables}).ListBy(ctx, typ, column, value)
}

// ListUsers filters by role only (the rest is SQL, tested against Postgres).
func (f *fakeStore) ListUsers(ctx context.Context, fl store.UserFilter, page, size int) ([]store.Row, int, error) {
	rows, err := f.List(ctx, store.User)
	if err != nil {
		return nil, 0, err
	}
	return rows, len(rows), nil
}

// BudgetLinks: the rows whose litellm_fields (as written: JSONMerge or JSON text) link budget id.
func (t *fakeTx) BudgetLinks(ctx context.Context, id string) ([]store.BudgetLink, error) {
	var out []store.BudgetLink
	for _, l := range []struct {
		typ         store.ObjectType
		kind, field string
	}{{store.EndUser, "end_user", "budget_id"}, {store.Key, "key", "budget_id"}, {store.Organization, "organization", "budget_id"}, {store.Team, "team", "team_member_budget_id"}} {
		for rid, r := range t.tables[l.typ] {
			raw := litellmFieldsRaw(store.Values(r))
			var lf map[string]any
			if json.Unmarshal(raw, &lf) == nil && lf[l.field] == id {
				out = append(out, store.BudgetLink{Kind: l.kind, ID: rid})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// AccessGroupHolders: the keys and teams whose litellm_fields (as written) hold group id.
func (t *fakeTx) AccessGroupHolders(ctx context.Context, id string) (keys, teams []string, err error) {
	for _, typ := range []store.ObjectType{store.Key, store.Team} {
		for rid, r := range t.tables[typ] {
			raw := litellmFieldsRaw(store.Values(r))
			var lf struct {
				IDs []string `json:"access_group_ids"`
			}
			if json.Unmarshal(raw, &lf) == nil && slices.Contains(lf.IDs, id) {
				if typ == store.Key {
					keys = append(keys, rid)
				} else {
					teams = append(teams, rid)
				}
			}
		}
	}
	sort.Strings(keys)
	sort.Strings(teams)
	return keys, teams, nil
}

// GetByNameForShare: the policy named name (the only type looked up by name in a write).
func (t *fakeTx) GetByNameForShare(ctx context.Context, typ store.ObjectType, name string) (store.Row, error) {
	rows, err := t.ListBy(ctx, typ, "policy_name", name)
	if err != nil {
		return store.Row{}, err
	}
	if len(rows) == 0 {
		return store.Row{}, store.ErrNotFound
	}
	t.f.shareLocks = append(t.f.shareLocks, string(typ)+" "+rows[0].ID)
	return rows[0], nil
}

// PolicyLinks: the keys and teams whose litellm_fields list policy name, the policies
// inheriting it.
func (t *fakeTx) PolicyLinks(ctx context.Context, name string) ([]string, error) {
	var out []string
	for _, l := range []struct {
		typ  store.ObjectType
		kind string
	}{{store.Key, "key"}, {store.Team, "team"}} {
		for rid, r := range t.tables[l.typ] {
			raw := litellmFieldsRaw(store.Values(r))
			var lf struct {
				Policies []string `json:"policies"`
			}
			if json.Unmarshal(raw, &lf) == nil && slices.Contains(lf.Policies, name) {
				out = append(out, l.kind+" "+rid)
			}
		}
	}
	for _, r := range t.tables[store.Policy] {
		if r["inherit"] == name {
			out = append(out, "policy "+fmt.Sprint(r["policy_name"]))
		}
	}
	sort.Strings(out)
	return out, nil
}

// ProjectKeys: the keys whose litellm_fields.project_id is id.
func (t *fakeTx) ProjectKeys(ctx context.Context, id string) ([]string, error) {
	var out []string
	for rid, r := range t.tables[store.Key] {
		var lf struct {
			ProjectID string `json:"project_id"`
		}
		if json.Unmarshal(litellmFieldsRaw(store.Values(r)), &lf) == nil && lf.ProjectID == id {
			out = append(out, "key "+rid)
		}
	}
	return out, nil
}
