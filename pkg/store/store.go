// Package store owns every SQL query lockstep runs. It maps pgx errors to the sentinels below;
// nothing above it (but the listener in pkg/notify) imports pgx.
package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	migrations "lockstep/sql"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrNotFound: the row does not exist (or is filtered out, e.g. a guardrail not 'active').
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint refused the write (SQLSTATE 23505).
	ErrConflict = errors.New("already exists")
	// ErrInvalid: a check / not-null / foreign key constraint refused the write (SQLSTATE class 23).
	ErrInvalid = errors.New("invalid row")
	// ErrUnavailable: Postgres could not be reached or the connection broke mid-query.
	ErrUnavailable = errors.New("database unavailable")
)

// ObjectType names a registry table in the change log's object_type column.
type ObjectType string

// The registry object types (gateway.registry_changes.object_type).
const (
	Model     ObjectType = "model"
	Guardrail ObjectType = "guardrail"
	Agent     ObjectType = "agent"
	Key       ObjectType = "key"
	// LiteLLM's teams, internal users, organizations and end users (customers): sql/005.
	Team         ObjectType = "team"
	User         ObjectType = "user"
	Organization ObjectType = "organization"
	EndUser      ObjectType = "end_user"
	// LiteLLM's budgets (LiteLLM_BudgetTable): sql/012.
	Budget ObjectType = "budget"
	// LiteLLM's unified access groups (LiteLLM_AccessGroupTable): sql/016.
	AccessGroup ObjectType = "access_group"
	// LiteLLM's guardrail policies (LiteLLM_PolicyTable): sql/017.
	Policy ObjectType = "policy"
	// LiteLLM's policy attachments (LiteLLM_PolicyAttachmentTable): sql/021.
	PolicyAttachment ObjectType = "policy_attachment"
	// LiteLLM's projects (LiteLLM_ProjectTable): sql/020.
	Project ObjectType = "project"
)

// Table describes one registry table: everything the generic queries (full load, re-read by
// id, read-through by name, writes) need to know about it. Adding a registry to the change feed
// is one Table in Tables plus the table and its triggers in a migration (see sql/001).
type Table struct {
	Type ObjectType
	// Plural names the registry in supported_db_objects, /sync/lag and /metrics ("models").
	Plural string
	Table  string // schema-qualified
	PK     string
	// Name is the column a read-through looks a requested name up by (the registry's
	// secondary index, or the primary key when the registry is looked up by id only).
	Name string
	// ByIDOrName makes a read-through match the primary key too (A2A addresses an agent by
	// id or name).
	ByIDOrName bool
	// Filter is an extra WHERE condition every load applies ("true": none).
	Filter string
}

// Tables lists every registry table in load order.
var Tables = []Table{
	{Type: Model, Plural: "models", Table: "gateway.models", PK: "model_id", Name: "model_name", Filter: "true"},
	{Type: Guardrail, Plural: "guardrails", Table: "gateway.guardrails", PK: "guardrail_id", Name: "guardrail_name", Filter: "t.status = 'active'"},
	{Type: Agent, Plural: "agents", Table: "gateway.agents", PK: "agent_id", Name: "agent_name", ByIDOrName: true, Filter: "true"},
	{Type: Key, Plural: "keys", Table: "gateway.api_keys", PK: "token", Name: "token", Filter: "true"},
	{Type: Organization, Plural: "organizations", Table: "gateway.organizations", PK: "organization_id", Name: "organization_id", Filter: "true"},
	{Type: Team, Plural: "teams", Table: "gateway.teams", PK: "team_id", Name: "team_id", Filter: "true"},
	{Type: User, Plural: "users", Table: "gateway.users", PK: "user_id", Name: "user_id", Filter: "true"},
	{Type: EndUser, Plural: "end_users", Table: "gateway.end_users", PK: "user_id", Name: "user_id", Filter: "true"},
	{Type: Budget, Plural: "budgets", Table: "gateway.budgets", PK: "budget_id", Name: "budget_id", Filter: "true"},
	{Type: AccessGroup, Plural: "access_groups", Table: "gateway.access_groups", PK: "access_group_id", Name: "access_group_id", Filter: "true"},
	{Type: Policy, Plural: "policies", Table: "gateway.policies", PK: "policy_id", Name: "policy_name", Filter: "true"},
	{Type: PolicyAttachment, Plural: "policy_attachments", Table: "gateway.policy_attachments", PK: "attachment_id", Name: "attachment_id", Filter: "true"},
	{Type: Project, Plural: "projects", Table: "gateway.projects", PK: "project_id", Name: "project_id", Filter: "true"},
}

// AllTypes lists every object type in load order.
var AllTypes = func() []ObjectType {
	out := make([]ObjectType, len(Tables))
	for i, t := range Tables {
		out[i] = t.Type
	}
	return out
}()

var tables = func() map[ObjectType]Table {
	m := make(map[ObjectType]Table, len(Tables))
	for _, t := range Tables {
		m[t.Type] = t
	}
	return m
}()

// Plural is typ's registry name ("models") as supported_db_objects and /sync/lag spell it;
// the type itself when it is unknown.
func (typ ObjectType) Plural() string {
	if t, ok := tables[typ]; ok {
		return t.Plural
	}
	return string(typ)
}

// TypeOfPlural returns the object type a registry name ("models") stands for.
func TypeOfPlural(plural string) (ObjectType, bool) {
	for _, t := range Tables {
		if t.Plural == plural {
			return t.Type, true
		}
	}
	return "", false
}

// Row is one registry row as loaded: its id, version and either the whole row as JSON in Data
// (row_to_json, so column names are the JSON keys) or, for a typed table read by a load
// (LoadAll, Reload, LoadByName of keys and models, typed.go), its typed columns in Cols
// (*KeyCols, *ModelCols) and no Data.
type Row struct {
	Type    ObjectType
	ID      string
	Version int64
	Data    []byte
	Cols    any
}

// Store runs queries on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	// opTimeout bounds every operation whose ctx has no sooner deadline, so a frozen or
	// half-open database fails a call with ErrUnavailable instead of hanging it.
	opTimeout time.Duration
	pooler    bool // see BehindPooler
}

// DefaultOpTimeout bounds one store operation (a transaction counts as one).
const DefaultOpTimeout = 5 * time.Second

// op derives the context for one operation: ctx, bounded by the store's operation timeout.
// callerOrOp is op, except that a deadline the caller set, however far, is kept.
func (s *Store) callerOrOp(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return s.op(ctx)
}

func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.opTimeout {
		return ctx, noCancel // bounded already: no context (and timer) of its own
	}
	return context.WithTimeout(ctx, s.opTimeout)
}

func noCancel() {}

// Open builds a pool from a libpq URL or DSN (pgxpool.ParseConfig) and pings it.
//
// Query mode: pgx's default caches named prepared statements per connection, which a pooler
// in transaction pooling mode breaks (PgBouncer 1.18 hands each transaction any server
// connection: SQLSTATE 42P05 "prepared statement … already exists" or 26000 "… does not
// exist"). A default_query_exec_mode in the URL is honoured as pgx parses it; without one,
// Open asks the server which port it listens on, and when that is not the port dialed (a
// pooler or proxy is in the path, e.g. PgBouncer on 6432 in front of 5432) it reopens the pool
// with cache_describe: the unnamed statement only, parsed again in each execution's round trip,
// which needs no server-side state between transactions. BehindPooler reports the outcome.
//
// Errors: ErrUnavailable (wrapped with the cause) when the database cannot be reached.
func Open(ctx context.Context, url string) (*Store, error) { return OpenAs(ctx, url, "") }

// OpenAs is Open with the pool's connections named appName (the application_name run-time
// parameter, which pg_stat_activity shows; PostgreSQL docs 20.8.1) unless the URL names them
// itself (application_name=...). A replica opens its pool as lockstep-pool-<replica id>, as
// its change feed's connection is lockstep-listener-<replica id>.
func OpenAs(ctx context.Context, url, appName string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if appName != "" && cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	// pgconn's own dialer's keepalive (5 min), with reads and writes that do not wake the
	// runtime's sysmon thread (Dial)
	cfg.ConnConfig.DialFunc = Dial(&net.Dialer{KeepAlive: 5 * time.Minute})
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st := &Store{pool: pool, opTimeout: DefaultOpTimeout}
	if strings.Contains(url, "default_query_exec_mode") {
		return st, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var port string
	if err := pool.QueryRow(pctx, "SELECT current_setting('port')", pgx.QueryExecModeSimpleProtocol).Scan(&port); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", mapErr(err))
	}
	if port == strconv.Itoa(int(cfg.ConnConfig.Port)) {
		return st, nil
	}
	pool.Close()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	if st.pool, err = openPool(ctx, cfg); err != nil {
		return nil, err
	}
	st.pooler = true
	return st, nil
}

func openPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", mapErr(err))
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", mapErr(err))
	}
	return pool, nil
}

// BehindPooler reports whether Open found a pooler or proxy between the pool and Postgres
// (and so runs in cache_describe query mode).
func (s *Store) BehindPooler() bool { return s.pooler }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// ConnConfig returns a copy of the connection settings the pool's connections use, parsed
// once by pgxpool.ParseConfig, for the connections that are never pooled (the LISTEN change
// feed, the logical replication stream). Pool and pgx settings in the URL (pool_max_conns,
// pool_min_conns, default_query_exec_mode, statement_cache_capacity, ...) are already taken
// out of RuntimeParams, so they never reach the server as session parameters (which it would
// refuse: FATAL unrecognized configuration parameter), and the query mode Open chose
// (cache_describe behind a pooler) is kept. The caller may change the copy.
func (s *Store) ConnConfig() *pgx.ConnConfig { return s.pool.Config().ConnConfig.Copy() }

// ParseConnConfig parses a libpq URL or DSN the way Open parses the pool's (pgxpool.ParseConfig),
// for a dedicated connection with a URL of its own (--listen-database-url): pool and pgx
// settings are taken out of RuntimeParams, as in [Store.ConnConfig].
func ParseConnConfig(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return cfg.ConnConfig, nil
}

// Querier runs one query: a *pgxpool.Pool, or one *pgx.Conn (the change feed's own LISTEN
// connection, which re-reads a notification's row on the connection that delivered it:
// [Store.ReloadOn]).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Ping checks the database answers within ctx.
func (s *Store) Ping(ctx context.Context) error { return mapErr(s.pool.Ping(ctx)) }

// connectMessage is a failed connect's text with each distinct attempt once: pgconn tries a
// host again without TLS after sslmode=prefer's TLS attempt fails, and both dial errors read
// the same ("connection refused" twice).
func connectMessage(e *pgconn.ConnectError) string {
	var parts []string
	inner := e.Unwrap()
	if j, ok := inner.(interface{ Unwrap() []error }); ok {
		for _, x := range j.Unwrap() {
			if m := x.Error(); !slices.Contains(parts, m) {
				parts = append(parts, m)
			}
		}
	} else if inner != nil {
		parts = append(parts, inner.Error())
	}
	return fmt.Sprintf("failed to connect to `user=%s database=%s`: %s", e.Config.User, e.Config.Database, strings.Join(parts, "; "))
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	// A failed connect is unavailability whatever the server said (e.g. 55000 "database is
	// not accepting connections", 53300 "too many connections", 28P01 bad password).
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w: %s", ErrUnavailable, connectMessage(connErr))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 {
		// SQLSTATE classes: PostgreSQL docs Appendix A "PostgreSQL Error Codes".
		switch class := pgErr.Code[:2]; {
		case pgErr.Code == "23505":
			return fmt.Errorf("%w: %s", ErrConflict, pgErr.Detail)
		case class == "23" || class == "22": // integrity constraint violation, data exception (e.g. NUL in text)
			return fmt.Errorf("%w: %s", ErrInvalid, pgErr.Message)
		case class == "08" || class == "53" || class == "57" || pgErr.Code == "55000" || pgErr.Code == "55006" || pgErr.Code == "40001" || pgErr.Code == "40P01":
			// connection exception, insufficient resources, operator intervention, object not
			// in prerequisite state, serialization failure/deadlock: retry later
			return fmt.Errorf("%w: %s", ErrUnavailable, pgErr.Message)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if pgconn.SafeToRetry(err) || isNetErr(err) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

func isNetErr(err error) bool {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "broken pipe", "connection reset", "closed pool", "conn closed", "unexpected EOF", "EOF"} {
		if containsFold(msg, s) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Migrate applies every embedded migration not yet applied, in order, each in its own
// transaction that first takes a transaction-level advisory lock (PostgreSQL docs 9.27.10
// "Advisory Lock Functions", pg_advisory_xact_lock), so replicas starting together do not race.
// A transaction-level lock, unlike a session one, also holds through a pooler in transaction
// pooling mode (PgBouncer), where consecutive statements outside a transaction may run on
// different server connections.
func (s *Store) Migrate(ctx context.Context) error {
	h := fnv.New64a()
	h.Write([]byte("lockstep.migrate"))
	lockID := int64(h.Sum64() >> 1)
	locked := func(f func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockID); err != nil {
				return fmt.Errorf("advisory lock: %w", err)
			}
			return f(tx)
		})
	}
	applied := map[int]bool{}
	err := locked(func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS gateway;
			CREATE TABLE IF NOT EXISTS gateway.schema_migrations (
				version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("bookkeeping table: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM gateway.schema_migrations")
		if err != nil {
			return err
		}
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
		for _, v := range vs {
			applied[v] = true
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", mapErr(err))
	}
	for _, m := range migrations.All() {
		if applied[m.Version] {
			continue
		}
		err := locked(func(tx pgx.Tx) error {
			var done bool // applied by another replica while this one waited for the lock
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM gateway.schema_migrations WHERE version = $1)", m.Version).Scan(&done); err != nil || done {
				return err
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO gateway.schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, mapErr(err))
		}
	}
	return nil
}

func scanRows(typ ObjectType, rows pgx.Rows) ([]Row, error) {
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.Version, &r.Data); err != nil {
			return nil, mapErr(err)
		}
		r.Type = typ
		out = append(out, r)
	}
	return out, mapErr(rows.Err())
}

func selectSQL(ti Table, where string) string {
	return fmt.Sprintf("SELECT t.%s, t.version, row_to_json(t)::text FROM %s t WHERE %s AND (%s)", ti.PK, ti.Table, ti.Filter, where)
}

// loadSQL is selectSQL for the change feed's loads: typed columns for a typed table (typed.go).
func loadSQL(ti Table, where string) string {
	return fmt.Sprintf("SELECT t.%s, t.version, %s FROM %s t WHERE %s AND (%s)", ti.PK, selectList(ti.Type), ti.Table, ti.Filter, where)
}

func info(typ ObjectType) (Table, error) {
	ti, ok := tables[typ]
	if !ok {
		return ti, fmt.Errorf("unknown object type %q", typ)
	}
	return ti, nil
}

// Snapshot is the outcome of a full load: every loadable row of one type as of one MVCC
// snapshot, that snapshot's xmin (the change-log watermark) and the change log's head seq.
type Snapshot struct {
	Rows      []Row
	Watermark uint64
	HeadSeq   int64
}

// LoadAll reads every loadable row of typ (guardrails: only status 'active') in one
// REPEATABLE READ snapshot, together with the snapshot's xmin and the change-log head; a
// large table is read in parallel partitions of that one snapshot (load.go). prepare, when not
// nil, is called on each chunk of rows as it is read, concurrently across partitions (the
// change feed builds runtime objects there, so a cold start builds while it streams); it may
// replace a row's Cols.
func (s *Store) LoadAll(ctx context.Context, typ ObjectType, prepare func([]Row)) (Snapshot, error) {
	ti, err := info(typ)
	if err != nil {
		return Snapshot{}, err
	}
	var snap Snapshot
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var wm string
		if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
			COALESCE((SELECT max(seq) FROM gateway.registry_changes), 0)`).Scan(&wm, &snap.HeadSeq); err != nil {
			return err
		}
		snap.Watermark, _ = strconv.ParseUint(wm, 10, 64)
		snap.Rows, err = s.loadRows(ctx, tx, ti, prepare)
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("load all %ss: %w", typ, mapErr(err))
	}
	return snap, nil
}

// LoadByIDs re-reads the loadable rows with the given primary keys in one query. Ids that
// are absent (deleted, or filtered out) are simply not returned.
func (s *Store) LoadByIDs(ctx context.Context, typ ObjectType, ids []string) ([]Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, selectSQL(ti, "t."+ti.PK+" = ANY($1)"), ids)
	if err != nil {
		return nil, fmt.Errorf("load %ss by id: %w", typ, mapErr(err))
	}
	out, err := scanRows(typ, rows)
	if err != nil {
		return nil, fmt.Errorf("load %ss by id: %w", typ, err)
	}
	return out, nil
}

// Reload re-reads rows by primary key for the change feed and tells apart the two ways an id
// can be missing from the loadable set: filtered lists the rows (id and version only) that
// are visible but not loadable (a guardrail not 'active'); an id in neither result is not visible at all (deleted,
// or — with logical decoding, which can deliver a commit just before it becomes visible to
// other sessions — not visible yet).
//
// One id — a notification's re-read, the usual case — is read with "= $1", several with
// "= ANY($1)": the array parameter costs the server about twice a single-key lookup (measured
// 15–23 µs of backend CPU against 30–38 µs per query on the shared 2-core machine), and a
// write's notification is re-read by every replica.
func (s *Store) Reload(ctx context.Context, typ ObjectType, ids []string) (rows []Row, filtered []Row, err error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.ReloadOn(ctx, s.pool, typ, ids)
}

// ReloadOn is Reload through on: the pool, or a connection of the caller's that is idle (not
// in a transaction, no query running), e.g. the change feed's LISTEN connection between two
// notifications. Same statements, results and errors as Reload, but without the store's
// operation timeout: the caller bounds the call by cancelling ctx (the change feed's inline
// re-read, whose watchdog gives it up after the liveness probe's bound of silence; a timer per
// call would cost every notification on every replica).
func (s *Store) ReloadOn(ctx context.Context, on Querier, typ ObjectType, ids []string) (rows []Row, filtered []Row, err error) {
	q, ok := reloadSQL[typ]
	if !ok {
		return nil, nil, fmt.Errorf("unknown object type %q", typ)
	}
	var res pgx.Rows
	if len(ids) == 1 {
		res, err = on.Query(ctx, q.one, ids[0])
	} else {
		res, err = on.Query(ctx, q.many, ids)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reload %ss: %w", typ, mapErr(err))
	}
	defer res.Close()
	for res.Next() {
		var r Row
		var loadable bool
		if err := scanRow(typ, res, &r, &loadable); err != nil {
			return nil, nil, fmt.Errorf("reload %ss: %w", typ, mapErr(err))
		}
		if !loadable {
			r.Data, r.Cols = nil, nil
			filtered = append(filtered, r)
			continue
		}
		rows = append(rows, r)
	}
	if err := res.Err(); err != nil {
		return nil, nil, fmt.Errorf("reload %ss: %w", typ, mapErr(err))
	}
	return rows, filtered, nil
}

// PrepareReload prepares ReloadOn's one-id statement of each type on conn (the change feed's
// LISTEN connection, right after it connects), so that the first notification a session
// re-reads costs one round trip, not two (Parse and Describe, then Bind and Execute: every
// receiver's first change after a (re)connect was its slowest), and runs each once, so that
// the server has planned it and opened its table. A no-op unless conn keeps
// prepared statements (default_query_exec_mode cache_statement, pgx's default): behind a
// pooler (cache_describe, see Open) a prepared statement would not survive the transaction.
//
// It is an optimisation, so it never waits on a lock: a table locked meanwhile (a migration's
// ALTER TABLE queued behind a long transaction blocks even the Parse) is skipped after
// prepareLockWait (lock_timeout, reset afterwards) and left to be prepared by its first
// re-read. Waiting instead ran into the caller's bound, whose expiry closes the connection:
// the feed could not reconnect while any registry table was locked. An error is returned
// only when the connection failed.
func PrepareReload(ctx context.Context, conn *pgx.Conn, types []ObjectType) error {
	if conn.Config().DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil
	}
	if _, err := conn.Exec(ctx, "SET lock_timeout = "+strconv.Itoa(int(prepareLockWait.Milliseconds()))); err != nil {
		return fmt.Errorf("prepare the re-reads: %w", mapErr(err))
	}
	for _, t := range types {
		q, ok := reloadSQL[t]
		if !ok {
			continue
		}
		_, err := conn.Prepare(ctx, q.one, q.one)
		if err == nil {
			// run it once (no row has the empty key's id, and none is kept if one does): the
			// backend plans it and opens the table and its index now, not at the first change
			var rows pgx.Rows
			if rows, err = conn.Query(ctx, q.one, ""); err == nil {
				rows.Close()
				err = rows.Err()
			}
		}
		if err != nil && conn.IsClosed() {
			return fmt.Errorf("prepare the %s re-read: %w", t, mapErr(err))
		}
	}
	if _, err := conn.Exec(ctx, "RESET lock_timeout"); err != nil {
		return fmt.Errorf("prepare the re-reads: %w", mapErr(err))
	}
	return nil
}

// prepareLockWait is the longest PrepareReload waits on a table's lock.
const prepareLockWait = 100 * time.Millisecond

// reloadSQL is Reload's two statements per type: by one primary key, and by an array of them.
var reloadSQL = func() map[ObjectType]struct{ one, many string } {
	out := make(map[ObjectType]struct{ one, many string }, len(tables))
	for typ, ti := range tables {
		base := fmt.Sprintf("SELECT t.%s, t.version, %s, (%s) FROM %s t WHERE t.%s", ti.PK, selectList(typ), ti.Filter, ti.Table, ti.PK)
		out[typ] = struct{ one, many string }{base + " = $1", base + " = ANY($1)"}
	}
	return out
}()

// LoadByName reads the loadable rows a read-through needs for one requested name: models by
// model_name (every deployment of the group), guardrails by guardrail_name, agents by
// agent_id or agent_name, keys by token — exactly how each registry is looked up, so a row
// found is a row served. Returns ErrNotFound when none match.
func (s *Store) LoadByName(ctx context.Context, typ ObjectType, name string) ([]Row, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	ti, err := info(typ)
	if err != nil {
		return nil, err
	}
	where := "t." + ti.Name + " = $1"
	if ti.ByIDOrName {
		where += " OR t." + ti.PK + " = $1"
	}
	rows, err := s.pool.Query(ctx, loadSQL(ti, where), name)
	if err != nil {
		return nil, fmt.Errorf("load %s %q: %w", typ, name, mapErr(err))
	}
	out, err := scanLoaded(typ, rows, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("load %s %q: %w", typ, name, err)
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}
