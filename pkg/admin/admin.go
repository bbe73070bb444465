// Package admin holds the management use-cases of the LiteLLM-compatible API (models, access
// groups, keys, guardrails, agents, ...) with no HTTP in them: each takes decoded input, runs
// against the store behind the small interfaces below and returns the rows written or a typed
// error (errors.go) that pkg/api maps to a status and an envelope in its one error table.
//
// Every write goes through one write path, Admin.Write: fn runs in one transaction through a
// Writer that records each row it inserts or updates and each row it deletes; after the
// commit, and only then, every recorded row and tombstone is applied to the registry of its
// type (writer-local apply, DESIGN "read-your-writes": the writer serves its own write before
// the change feed brings it back; the apply is version-guarded, so the feed's later apply of
// the same version is a no-op). A failed transaction applies nothing.
package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lockstep/pkg/a2a"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// Tx is the store inside one transaction (store.TxStore), as narrow as the use-cases need.
// Errors are the store's sentinels (store.ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable).
type Tx interface {
	Get(ctx context.Context, typ store.ObjectType, id string) (store.Row, error)
	List(ctx context.Context, typ store.ObjectType) ([]store.Row, error)
	Insert(ctx context.Context, typ store.ObjectType, vals store.Values) (store.Row, error)
	Update(ctx context.Context, typ store.ObjectType, id string, vals store.Values) (store.Row, error)
	// Delete returns the tombstone version (OLD.version + 1).
	Delete(ctx context.Context, typ store.ObjectType, id string) (int64, error)
	// LockTable takes a SHARE ROW EXCLUSIVE lock on typ's table for the transaction.
	LockTable(ctx context.Context, typ store.ObjectType) error
	// LockName takes a transaction-scoped advisory lock named name.
	LockName(ctx context.Context, name string) error
	// TryLockName takes it only if no other transaction holds it (false: another does).
	TryLockName(ctx context.Context, name string) (bool, error)
	// DueKeyRotations reads and locks up to limit keys due for rotation at now
	// (store.RotationTimeLayout), skipping rows other transactions hold.
	DueKeyRotations(ctx context.Context, now string, limit int) ([]store.Row, error)
	// SetBudgetReset schedules (every > 0) or clears the budget reset of a key_spend token and
	// returns the next reset time (nil: none).
	SetBudgetReset(ctx context.Context, token string, every time.Duration) (*time.Time, error)
	// SetBudgetResetAt sets the next budget reset of a key_spend token to at.
	SetBudgetResetAt(ctx context.Context, token string, at time.Time) error
	// MoveKeySpend moves a key's spend row to its new token (a regenerated key).
	MoveKeySpend(ctx context.Context, from, to string) error
	// SetSpend sets the spend total of a key_spend token (a key's or an owner's).
	SetSpend(ctx context.Context, token string, spend float64) error
	// GetForUpdate reads a row and locks it until the transaction ends.
	GetForUpdate(ctx context.Context, typ store.ObjectType, id string) (store.Row, error)
	// GetForShare reads a row and takes a FOR SHARE lock on it until the transaction ends.
	GetForShare(ctx context.Context, typ store.ObjectType, id string) (store.Row, error)
	// ListBy reads the rows of typ whose column equals value.
	ListBy(ctx context.Context, typ store.ObjectType, column, value string) ([]store.Row, error)
	// DeleteBy deletes the rows of typ whose column equals value: their ids with their
	// tombstone versions.
	DeleteBy(ctx context.Context, typ store.ObjectType, column, value string) (map[string]int64, error)
	// BudgetLinks lists what links budget id: a few of the objects (end users, keys,
	// organizations, teams by their member budget) and every team and organization
	// membership.
	BudgetLinks(ctx context.Context, id string) ([]store.BudgetLink, error)
	// AccessGroupHolders lists the keys (tokens) and teams (ids) whose access_group_ids hold
	// access group id, each in id order.
	AccessGroupHolders(ctx context.Context, id string) (keys, teams []string, err error)
	// GetByNameForShare reads the row of typ named name (its Table.Name column) and takes a
	// FOR SHARE lock on it until the transaction ends.
	GetByNameForShare(ctx context.Context, typ store.ObjectType, name string) (store.Row, error)
	// PolicyLinks names the keys, teams and policies that use policy name ("key <token>",
	// "team <id>", "policy <name>"), at most a few.
	PolicyLinks(ctx context.Context, name string) ([]string, error)
	// ProjectKeys names the keys linked to project id ("key <token>"), at most a few.
	ProjectKeys(ctx context.Context, id string) ([]string, error)
}

// Store is the database as the use-cases see it: transactions and plain reads.
type Store interface {
	// Tx runs fn in one transaction: its writes commit together or not at all; fn's error is
	// returned as is.
	Tx(ctx context.Context, fn func(Tx) error) error
	Get(ctx context.Context, typ store.ObjectType, id string) (store.Row, error)
	List(ctx context.Context, typ store.ObjectType) ([]store.Row, error)
	// ListPage is one page (1-based) of typ's rows by creation, with the total count.
	ListPage(ctx context.Context, typ store.ObjectType, page, size int) ([]store.Row, int, error)
	// GetKeySpend reads the spend rows of key_spend tokens (absent: none).
	GetKeySpend(ctx context.Context, tokens []string) (map[string]store.KeySpend, error)
	// ListBy reads the rows of typ whose column equals value.
	ListBy(ctx context.Context, typ store.ObjectType, column, value string) ([]store.Row, error)
	// ListUsers reads one page of gateway.users as f selects, with the total.
	ListUsers(ctx context.Context, f store.UserFilter, page, size int) ([]store.Row, int, error)
}

// Sink is a registry as the write path sees it (registry.Registry, notify.Sink): its object
// type and the version-guarded apply of rows and tombstones.
type Sink interface {
	Type() store.ObjectType
	Apply(rows []store.Row, absent map[string]int64) int
}

// Admin runs the management use-cases.
type Admin struct {
	st         Store
	sinks      map[store.ObjectType]Sink
	router     *router.Router
	guardrails *registry.Registry[*guardrail.Guardrail]
	agents     *registry.Registry[*a2a.Agent]
	supported  map[store.ObjectType]bool
	hasDB      bool              // false: st is noDB
	build      *provider.Builder // the secrets policy and salt key models and agents are built and sealed with
}

// Deps is what the use-cases run on.
type Deps struct {
	// Store is the database (nil: none; every write then fails).
	Store Store
	// Router serves the models registry (config-file entries, read-through by name).
	Router *router.Router
	// Guardrails and Agents are read for their config-file entries (never written here).
	Guardrails *registry.Registry[*guardrail.Guardrail]
	Agents     *registry.Registry[*a2a.Agent]
	// Supported is supported_db_objects: the types read from and written to Postgres.
	Supported map[store.ObjectType]bool
	// Deployments builds deployments under the configured secrets policy and salt key
	// (provider.Policy): models and agents are validated and their litellm_params sealed with
	// it. nil: the default policy.
	Deployments *provider.Builder
	// Registries are the registries a write is applied to, one per object type: the one list
	// of registries (the wiring's Deps.Registries). A type without one here is written but
	// applied nowhere.
	Registries []Sink
}

// New builds the use-cases.
func New(d Deps) *Admin {
	a := &Admin{st: d.Store, router: d.Router, guardrails: d.Guardrails, agents: d.Agents, supported: d.Supported, hasDB: d.Store != nil, build: d.Deployments, sinks: map[store.ObjectType]Sink{}}
	if !a.hasDB {
		a.st = noDB{}
	}
	for _, s := range d.Registries {
		a.sinks[s.Type()] = s
	}
	return a
}

// Stored reports whether objects of typ are read from and written to Postgres here.
func (a *Admin) Stored(typ store.ObjectType) bool { return a.hasDB && a.supported[typ] }

// RequireDB refuses a management call on typ (what names them: "models") unless typ is stored
// in Postgres here: Unavailable "no database configured: ..." without a database, Invalid
// "... are not stored in the database on this gateway: ..." when supported_db_objects leaves
// typ out.
func (a *Admin) RequireDB(typ store.ObjectType, what string) error {
	if !a.hasDB {
		return &Unavailable{Msg: fmt.Sprintf("no database configured: %s are stored in Postgres; set --database-url or general_settings.database_url", what)}
	}
	if !a.supported[typ] {
		return invalidf("%s are not stored in the database on this gateway: add %q to general_settings.supported_db_objects", what, string(typ)+"s")
	}
	return nil
}

// noDB is the Store without a database: every call fails with store.ErrUnavailable (the
// routes check RequireDB first, so this is a guard, not a path).
type noDB struct{}

var errNoDB = fmt.Errorf("no database configured: %w", store.ErrUnavailable)

func (noDB) Tx(context.Context, func(Tx) error) error { return errNoDB }
func (noDB) Get(context.Context, store.ObjectType, string) (store.Row, error) {
	return store.Row{}, errNoDB
}
func (noDB) List(context.Context, store.ObjectType) ([]store.Row, error) { return nil, errNoDB }
func (noDB) ListPage(context.Context, store.ObjectType, int, int) ([]store.Row, int, error) {
	return nil, 0, errNoDB
}
func (noDB) GetKeySpend(context.Context, []string) (map[string]store.KeySpend, error) {
	return nil, errNoDB
}
func (noDB) ListBy(context.Context, store.ObjectType, string, string) ([]store.Row, error) {
	return nil, errNoDB
}
func (noDB) ListUsers(context.Context, store.UserFilter, int, int) ([]store.Row, int, error) {
	return nil, 0, errNoDB
}

// Database is Postgres as a replica's API uses it: the management store (Store: its
// transactions and reads) and the spend routes' reads (GET /spend/logs, an owner's spend).
// PG adapts *store.Store; nil: no database.
type Database interface {
	Store
	SpendReports
	SpendLogs(ctx context.Context, token string, start, end time.Time, limit int) ([]SpendLog, error)
	GetKeySpend(ctx context.Context, tokens []string) (map[string]KeySpend, error)
}

// PG adapts *store.Store to Database (nil: nil).
func PG(s *store.Store) Database {
	if s == nil {
		return nil
	}
	return pg{s}
}

type pg struct{ *store.Store }

func (p pg) Tx(ctx context.Context, fn func(Tx) error) error {
	return p.Store.Tx(ctx, func(tx *store.TxStore) error { return fn(tx) })
}

var _ Tx = (*store.TxStore)(nil)

// change is one recorded write: the row (nil Data: a tombstone at Version).
type change struct {
	row  store.Row
	gone bool
}

// Writer is the transaction a write path runs in: reads pass through; inserts, updates and
// deletes pass through and are recorded for the apply after commit (the last write of an id
// wins).
type Writer struct {
	tx      Tx
	order   []string // "type\x00id", in first-write order
	changes map[string]change
}

func key(typ store.ObjectType, id string) string { return string(typ) + "\x00" + id }

func (w *Writer) record(c change) {
	k := key(c.row.Type, c.row.ID)
	if _, ok := w.changes[k]; !ok {
		w.order = append(w.order, k)
	}
	w.changes[k] = c
}

// Get reads a row inside the transaction.
func (w *Writer) Get(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	return w.tx.Get(ctx, typ, id)
}

// List reads a whole table inside the transaction.
func (w *Writer) List(ctx context.Context, typ store.ObjectType) ([]store.Row, error) {
	return w.tx.List(ctx, typ)
}

// LockName takes the advisory lock name for the transaction (Tx.LockName).
func (w *Writer) LockName(ctx context.Context, name string) error {
	return w.tx.LockName(ctx, name)
}

// LockTable locks typ's table for the transaction (Tx.LockTable).
func (w *Writer) LockTable(ctx context.Context, typ store.ObjectType) error {
	return w.tx.LockTable(ctx, typ)
}

// Insert writes a new row; it is applied after commit.
func (w *Writer) Insert(ctx context.Context, typ store.ObjectType, vals store.Values) (store.Row, error) {
	if err := w.lockLinks(ctx, typ, vals); err != nil {
		return store.Row{}, err
	}
	row, err := w.tx.Insert(ctx, typ, vals)
	if err == nil {
		row.Type = typ
		w.record(change{row: row})
	}
	return row, err
}

// Update rewrites a row; it is applied after commit.
func (w *Writer) Update(ctx context.Context, typ store.ObjectType, id string, vals store.Values) (store.Row, error) {
	if err := w.lockLinks(ctx, typ, vals); err != nil {
		return store.Row{}, err
	}
	row, err := w.tx.Update(ctx, typ, id, vals)
	if err == nil {
		row.Type = typ
		w.record(change{row: row})
	}
	return row, err
}

// lockLinks locks, in the write's transaction, the budget, project, policies and unified
// access groups a write of typ with vals links (lockLinkedBudget, lockLinkedProject,
// lockLinkedPolicies, lockLinkedAccessGroups), so a link to a missing object can never commit.
func (w *Writer) lockLinks(ctx context.Context, typ store.ObjectType, vals store.Values) error {
	if err := w.lockLinkedBudget(ctx, typ, vals); err != nil {
		return err
	}
	if err := w.lockLinkedProject(ctx, typ, vals); err != nil {
		return err
	}
	if err := w.lockLinkedPolicies(ctx, typ, vals); err != nil {
		return err
	}
	return w.lockLinkedAccessGroups(ctx, typ, vals)
}

// Delete removes a row; its tombstone (the version Delete returns) is applied after commit.
func (w *Writer) Delete(ctx context.Context, typ store.ObjectType, id string) (int64, error) {
	v, err := w.tx.Delete(ctx, typ, id)
	if err == nil {
		w.record(change{row: store.Row{Type: typ, ID: id, Version: v}, gone: true})
	}
	return v, err
}

// deleteOne deletes the one row (typ, id) in a write of its own (its tombstone applied after
// commit); a row that is not there is notFound(id).
func (a *Admin) deleteOne(ctx context.Context, typ store.ObjectType, id string, notFound func(string) error) error {
	err := a.Write(ctx, func(w *Writer) error {
		_, err := w.Delete(ctx, typ, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return notFound(id)
	}
	return err
}

// GetForUpdate reads a row and locks it until the transaction ends (Tx.GetForUpdate).
func (w *Writer) GetForUpdate(ctx context.Context, typ store.ObjectType, id string) (store.Row, error) {
	return w.tx.GetForUpdate(ctx, typ, id)
}

// ListBy reads the rows of typ whose column equals value inside the transaction.
func (w *Writer) ListBy(ctx context.Context, typ store.ObjectType, column, value string) ([]store.Row, error) {
	return w.tx.ListBy(ctx, typ, column, value)
}

// DeleteBy deletes the rows of typ whose column equals value; their tombstones are applied
// after commit.
func (w *Writer) DeleteBy(ctx context.Context, typ store.ObjectType, column, value string) (map[string]int64, error) {
	gone, err := w.tx.DeleteBy(ctx, typ, column, value)
	if err == nil {
		for id, v := range gone {
			w.Deleted(typ, id, v)
		}
	}
	return gone, err
}

// SetBudgetReset is Tx.SetBudgetReset (gateway.key_spend has no registry: nothing to apply).
func (w *Writer) SetBudgetReset(ctx context.Context, token string, every time.Duration) (*time.Time, error) {
	return w.tx.SetBudgetReset(ctx, token, every)
}

// SetBudgetResetAt is Tx.SetBudgetResetAt (gateway.key_spend has no registry: nothing to
// apply).
func (w *Writer) SetBudgetResetAt(ctx context.Context, token string, at time.Time) error {
	return w.tx.SetBudgetResetAt(ctx, token, at)
}

// SetSpend is Tx.SetSpend (gateway.key_spend has no registry: nothing to apply).
func (w *Writer) SetSpend(ctx context.Context, token string, spend float64) error {
	return w.tx.SetSpend(ctx, token, spend)
}

// MoveKeySpend is Tx.MoveKeySpend.
func (w *Writer) MoveKeySpend(ctx context.Context, from, to string) error {
	return w.tx.MoveKeySpend(ctx, from, to)
}

// Deleted records a row the transaction removed other than by Delete — a primary-key change
// (the trigger logs the old id deleted at its version + 1), a cascade — so that its
// tombstone is applied after commit.
func (w *Writer) Deleted(typ store.ObjectType, id string, version int64) {
	w.record(change{row: store.Row{Type: typ, ID: id, Version: version}, gone: true})
}

// Hide turns the recorded write of row into a tombstone at its version: a row the registry's
// loads filter out (a guardrail not 'active') leaves the registry, as the change feed's
// re-read would make it.
func (w *Writer) Hide(row store.Row) {
	w.record(change{row: store.Row{Type: row.Type, ID: row.ID, Version: row.Version}, gone: true})
}

// Write is the one write path: fn runs in one transaction (Store.Tx) through a Writer; after
// the commit every row and tombstone the Writer recorded is applied to its type's registry,
// rows and tombstones of one type in one Apply. fn's error (or the commit's) is returned as is
// and nothing is applied.
func (a *Admin) Write(ctx context.Context, fn func(w *Writer) error) error {
	var w *Writer
	err := a.st.Tx(ctx, func(tx Tx) error {
		w = &Writer{tx: tx, changes: map[string]change{}} // a retried fn starts afresh
		return fn(w)
	})
	if err != nil {
		return err
	}
	a.apply(w)
	return nil
}

func (a *Admin) apply(w *Writer) {
	type batch struct {
		rows   []store.Row
		absent map[string]int64
	}
	var types []store.ObjectType
	byType := map[store.ObjectType]*batch{}
	for _, k := range w.order {
		c := w.changes[k]
		b := byType[c.row.Type]
		if b == nil {
			b = &batch{}
			byType[c.row.Type] = b
			types = append(types, c.row.Type)
		}
		if c.gone {
			if b.absent == nil {
				b.absent = map[string]int64{}
			}
			b.absent[c.row.ID] = c.row.Version
		} else {
			b.rows = append(b.rows, c.row)
		}
	}
	for _, t := range types {
		if s, ok := a.sinks[t]; ok {
			b := byType[t]
			s.Apply(b.rows, b.absent)
		}
	}
}
