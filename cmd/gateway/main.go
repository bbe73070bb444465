// Command gateway runs a lockstep replica (serve), applies migrations (migrate), or starts a
// throwaway local setup (dev). See API.md "Command line".
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"lockstep/pkg/a2a"
	"lockstep/pkg/a2a/remote"
	"lockstep/pkg/accounts"
	"lockstep/pkg/admin"
	"lockstep/pkg/api"
	"lockstep/pkg/call"
	"lockstep/pkg/cluster"
	"lockstep/pkg/gctune"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/notify"
	"lockstep/pkg/policy"
	"lockstep/pkg/provider"
	"lockstep/pkg/provider/bedrock"
	"lockstep/pkg/provider/gemini"
	"lockstep/pkg/provider/ollama"
	"lockstep/pkg/provider/textcompletion"
	"lockstep/pkg/provider/vertex"
	"lockstep/pkg/readthrough"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
	"lockstep/pkg/telemetry"
)

const usage = `usage:
  gateway serve   [--config FILE] [--addr HOST:PORT] [--database-url URL] [--master-key KEY]
                  [--replica-id ID] [--sync-source listen|logical] [--log-format json|console] [--no-migrate]
                  [--read-through-budget N] [--listen-database-url URL]
  gateway migrate --database-url URL
  gateway dev     [--replicas 2] [--base-port 4000]
  gateway healthcheck [--url URL]
  gateway version

"gateway <command> --help" (or "gateway help <command>") lists every flag of a command with
its env var and default.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "migrate":
		err = migrate(ctx, os.Args[2:])
	case "dev":
		err = dev(ctx, os.Args[2:])
	case "healthcheck":
		err = healthcheck(ctx, os.Args[2:])
	case "version", "--version", "-version":
		printVersion()
		return
	case "-h", "--help", "help":
		if len(os.Args) > 2 && os.Args[1] == "help" {
			err = commandHelp(ctx, os.Args[2])
			break
		}
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q (want serve, migrate, dev, healthcheck or version; see gateway --help)", os.Args[1])
	}
	logOut.Flush()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "gateway:", oneLine(err.Error()))
		os.Exit(exitCode(err))
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// serveFlags are serve's settings. Precedence: flag > env > config file > default.
type serveFlags struct {
	config, addr, databaseURL, masterKey, replicaID, syncSource, logFormat string
	readThroughBudget, listenURL                                           string
	noMigrate                                                              bool
}

func parseServe(args []string) (serveFlags, error) {
	var f serveFlags
	fs := newCommand("serve", "gateway serve [flags]",
		"Runs one replica: serves the LLM, A2A and management routes from memory, kept in sync with\n"+
			"Postgres by the change feed. Also read from the environment: GATEWAY_LOG_LEVEL\n"+
			"(debug, info, warn, error; default info); GATEWAY_SALT_KEY, then LITELLM_SALT_KEY (the key\n"+
			"provider credentials are encrypted with in the database; default none: stored in clear).")
	fs.StringVar(&f.config, "config", "", "LiteLLM-style YAML config `FILE` (model_list, guardrails, agents, general_settings, router_settings)")
	fs.StringVar(&f.addr, "addr", "", "`HOST:PORT` to listen on (env GATEWAY_ADDR; default 0.0.0.0:4000, or 127.0.0.1:4000 without a master key; without a master key only a loopback address is accepted)")
	fs.StringVar(&f.databaseURL, "database-url", "", "Postgres `URL` (env DATABASE_URL; default general_settings.database_url, else none: serve the config file only)")
	fs.StringVar(&f.masterKey, "master-key", "", "admin `KEY` (env GATEWAY_MASTER_KEY, then LITELLM_MASTER_KEY; default general_settings.master_key, else none: no auth, loopback only)")
	fs.StringVar(&f.replicaID, "replica-id", "", "replica `ID` shown in /sync/lag and logs (env GATEWAY_REPLICA_ID; default HOSTNAME-PID)")
	fs.StringVar(&f.syncSource, "sync-source", "listen", "change `SOURCE`: listen for LISTEN/NOTIFY, logical for logical replication")
	fs.StringVar(&f.logFormat, "log-format", "json", "log `FORMAT`: json or console")
	fs.BoolVar(&f.noMigrate, "no-migrate", false, "do not apply migrations on start")
	fs.StringVar(&f.listenURL, "listen-database-url", "", "`URL` of the change feed's own connection (LISTEN or logical replication), for when --database-url goes through PgBouncer in transaction pooling (env GATEWAY_LISTEN_DATABASE_URL; default: --database-url)")
	fs.StringVar(&f.readThroughBudget, "read-through-budget", "", "read-through DB fetches `N` per 5 s per registry; 0 = none, misses decided by the change feed's barrier alone (env GATEWAY_READ_THROUGH_BUDGET; default 20; a test and operations knob)")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, fmt.Errorf("serve: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("serve: unexpected argument %q (see gateway serve --help)", fs.Arg(0))
	}
	switch f.syncSource {
	case "listen", "logical":
	default:
		return f, fmt.Errorf("serve: --sync-source: %q is not a change source (want listen or logical)", f.syncSource)
	}
	if v := firstNonEmpty(f.readThroughBudget, os.Getenv("GATEWAY_READ_THROUGH_BUDGET")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, fmt.Errorf("serve: --read-through-budget (GATEWAY_READ_THROUGH_BUDGET): %q is not a count of fetches (want an integer >= 0)", v)
		}
		f.readThroughBudget = v
	}
	if f.logFormat != "json" && f.logFormat != "console" {
		return f, fmt.Errorf("serve: --log-format: %q (want json or console)", f.logFormat)
	}
	return f, nil
}

// listenAddr is the address serve listens on: addr (from --addr or GATEWAY_ADDR) or the
// default, 0.0.0.0:4000 with a master key and 127.0.0.1:4000 without one. Without a master
// key every caller is admin, so a non-loopback addr is refused (API.md "Security rules"),
// exit code 2.
func listenAddr(addr, master string) (string, error) {
	if addr == "" {
		if master == "" {
			return "127.0.0.1:4000", nil
		}
		return "0.0.0.0:4000", nil
	}
	if master == "" && !isLoopback(addr) {
		return "", &exitError{code: 2, err: fmt.Errorf("serve: refusing to listen on %s without a master key (every caller would be admin): set --master-key or GATEWAY_MASTER_KEY, or listen on a loopback address such as 127.0.0.1:4000", addr)}
	}
	return addr, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// logOut buffers the log (see bufferedLog); main flushes it before exiting.
var logOut = newBufferedLog(os.Stderr)

// logLevels are the GATEWAY_LOG_LEVEL values serve accepts (zerolog's level names).
var logLevels = []string{"debug", "info", "warn", "error"}

// logLevel is GATEWAY_LOG_LEVEL's level (info when unset); another value is an error naming
// the allowed ones.
func logLevel() (zerolog.Level, error) {
	v := os.Getenv("GATEWAY_LOG_LEVEL")
	if v == "" {
		return zerolog.InfoLevel, nil
	}
	if slices.Contains(logLevels, v) {
		return zerolog.ParseLevel(v)
	}
	return 0, fmt.Errorf("GATEWAY_LOG_LEVEL: %q is not a log level (want %s)", v, strings.Join(logLevels, ", "))
}

func newLogger(format string, lvl zerolog.Level) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	var w io.Writer = logOut
	if format == "console" {
		fi, err := os.Stderr.Stat()
		tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000", NoColor: !tty} // for people: unbuffered
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// vendors are the upstream APIs served beyond the built-in OpenAI-compatible and Anthropic
// providers (provider.Vendor): registered here, and nowhere else.
var vendors = []provider.Vendor{ollama.Vendor, gemini.Vendor, vertex.Vendor, bedrock.Vendor, bedrock.SageMakerVendor, textcompletion.Vendor, remote.Vendor}

func serve(ctx context.Context, args []string) error {
	f, err := parseServe(args)
	if err != nil {
		return err
	}
	gcMin, err := gcMinHeap()
	if err != nil {
		return err
	}
	gct := gctune.Start(gcMin) // nil (nothing) when GOGC or GOMEMLIMIT is set
	defer gct.Stop()
	cfg := &FileConfig{}
	if f.config != "" {
		preset := map[string]bool{ // flag > env > config: a config value these win over is not resolved
			"general_settings.database_url": firstNonEmpty(f.databaseURL, os.Getenv("DATABASE_URL")) != "",
			"general_settings.master_key":   firstNonEmpty(f.masterKey, os.Getenv("GATEWAY_MASTER_KEY"), os.Getenv("LITELLM_MASTER_KEY")) != "",
		}
		if cfg, err = loadConfig(f.config, preset); err != nil {
			return err
		}
	}
	// the secrets policy of database objects, which every row is built under
	policy := provider.Policy{AllowedEnvSecrets: cfg.GeneralSettings.AllowedEnvSecrets}
	if _, err := provider.NewBuilder(policy); err != nil {
		return fmt.Errorf("config %s: general_settings.%w", f.config, err)
	}
	// credentials at rest (LiteLLM's LITELLM_SALT_KEY), with which every row is built or written
	policy.SaltKey = firstNonEmpty(os.Getenv("GATEWAY_SALT_KEY"), os.Getenv("LITELLM_SALT_KEY"))
	deployments, err := provider.NewBuilder(policy, vendors...)
	if err != nil {
		return fmt.Errorf("salt key: %w", err)
	}
	models := router.Builder{Deployments: deployments}
	dbURL := firstNonEmpty(f.databaseURL, os.Getenv("DATABASE_URL"), cfg.GeneralSettings.DatabaseURL)
	master := firstNonEmpty(f.masterKey, os.Getenv("GATEWAY_MASTER_KEY"), os.Getenv("LITELLM_MASTER_KEY"), cfg.GeneralSettings.MasterKey)
	addrFrom, rawAddr := "--addr", f.addr
	if rawAddr == "" {
		addrFrom, rawAddr = "GATEWAY_ADDR", os.Getenv("GATEWAY_ADDR")
	}
	if rawAddr != "" {
		if _, _, err := splitAddr(rawAddr); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("serve: %s %w", addrFrom, err)}
		}
	}
	addr, err := listenAddr(rawAddr, master)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	replicaID := firstNonEmpty(f.replicaID, os.Getenv("GATEWAY_REPLICA_ID"), fmt.Sprintf("%s-%d", host, os.Getpid()))
	lvl, err := logLevel()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := newLogger(f.logFormat, lvl).With().Str("replica_id", replicaID).Logger()

	// OpenTelemetry (OTEL_* env, litellm_settings callbacks "otel"): on before the change feed
	// and the server start, flushed on exit
	tcfg, stopTelemetry, err := telemetry.Setup(ctx, telemetry.Options{Callbacks: cfg.LiteLLMSettings.callbacks(), InstanceID: replicaID, Version: buildVersion()})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTelemetry(sctx); err != nil {
			log.Warn().Err(err).Msg("telemetry: flush on exit failed")
		}
	}()
	if tcfg.Traces || tcfg.Logs {
		log.Info().Bool("traces", tcfg.Traces).Str("traces_protocol", tcfg.TracesProtocol).Bool("logs", tcfg.Logs).Str("logs_protocol", tcfg.LogsProtocol).Msg("telemetry: OTLP export on")
	}

	if len(cfg.notImplemented) > 0 {
		log.Info().Strs("keys", cfg.notImplemented).Msg("config: LiteLLM settings lockstep does not implement, accepted and ignored")
	}
	objects, err := buildConfigObjects(cfg, models)
	if err != nil {
		return err
	}
	supported := cfg.supported()
	var st *store.Store
	if dbURL != "" {
		if err := checkDatabaseURL(dbURLSource(f.databaseURL, os.Getenv("DATABASE_URL")), dbURL); err != nil {
			return err
		}
		if st, err = store.OpenAs(ctx, dbURL, "lockstep-pool-"+replicaID); err != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		defer st.Close()
		if !f.noMigrate {
			if err := st.Migrate(ctx); err != nil {
				return err
			}
		}
	} else {
		supported = map[store.ObjectType]bool{}
	}

	rto := readthrough.Options{}
	if f.readThroughBudget != "" {
		n, _ := strconv.Atoi(f.readThroughBudget)
		rto.Budget = n
		if n == 0 {
			rto.Budget = -1 // none: every miss is decided by the barrier
		}
	}
	regs := newRegistries(st, supported, rto, log, models)
	objects.install(regs)
	client := provider.NewClient()
	rs, _ := cfg.RouterSettings.Settings() // validated by loadConfig
	rt := router.New(regs.models, client, rs)

	var syncer *notify.Syncer
	if st != nil {
		listenURL := firstNonEmpty(f.listenURL, os.Getenv("GATEWAY_LISTEN_DATABASE_URL"))
		if st.BehindPooler() {
			log.Info().Bool("listen_database_url", listenURL != "").Msg("database url goes through a pooler (the server's port is not the one dialed): pool uses cache_describe, no named prepared statements")
		}
		syncer = notify.New(notify.Config{ReplicaID: replicaID, Store: st, Sinks: regs.sinks(), Logger: log, Source: notify.Source(f.syncSource), ListenURL: listenURL})
		if err := syncer.Start(ctx); err != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		defer syncer.Stop()
		// The initial load's garbage (every row read, a million for a million keys) is gone
		// once the registries are built: hand it back to the OS now rather than carry it at
		// the heap's high-water mark.
		debug.FreeOSMemory()
		// and make the GC floor resident again, so that the heap grows into touched pages,
		// not a page fault per 4 KiB allocated (pkg/gctune)
		gct.Pretouch()
		loaded()
	}
	knobs, err := governanceKnobs()
	if err != nil {
		return err
	}
	var view *cluster.Reporter
	if st != nil {
		// deployment caps and cooldowns held cluster-wide (pkg/router caps.go, cooldowns.go)
		rl := limits.New(limits.Config{Store: st, ReplicaID: replicaID, Window: knobs.window, SlotTTL: knobs.slotTTL,
			Log: log.With().Str("component", "router").Logger()})
		_ = rl.Start(ctx)
		defer rl.Stop()
		rt.Share(router.Shared{Limiter: rl, Cooldowns: st, ReplicaID: replicaID, Log: log.With().Str("component", "router").Logger()})
		view = cluster.New(cluster.Config{ReplicaID: replicaID, Addr: addr, Version: buildVersion(), Store: st, Status: syncer.Stats,
			Changed: syncer.StateChanged, Interval: knobs.clusterEvery, Logger: log, OnTick: rt.Tick})
		view.Start(ctx)
		defer view.Stop()
	}
	var limiter *limits.Limiter
	var tracker *spend.Tracker
	if st != nil {
		limiter = limits.New(limits.Config{Store: st, ReplicaID: replicaID, Window: knobs.window, SlotTTL: knobs.slotTTL,
			Log: log.With().Str("component", "limits").Logger()})
		_ = limiter.Start(ctx)
		defer limiter.Stop()
		retain, retainEvery, err := cfg.GeneralSettings.spendRetention()
		if err != nil {
			return err
		}
		tracker = spend.New(spend.Config{Store: st, ReplicaID: replicaID, FlushEvery: knobs.spendFlush,
			RetentionPeriod: retain, RetentionInterval: retainEvery,
			Log: log.With().Str("component", "spend").Logger()})
		_ = tracker.Start(ctx)
		defer tracker.Stop()
	}
	proxyBudget, err := cfg.LiteLLMSettings.proxyBudget()
	if err != nil {
		return err
	}
	rotateEvery, err := keyRotationEvery()
	if err != nil {
		return err
	}
	srv := api.New(api.Deps{
		ReplicaID: replicaID, MasterKey: master, DB: admin.PG(st), Tasks: a2a.PGTasks(st, replicaID), Syncer: syncer, Cluster: view, Router: rt, Client: client,
		Guardrails: regs.guardrails, Agents: regs.agents, Keys: regs.keys,
		Teams: regs.teams, Users: regs.users, Organizations: regs.orgs, EndUsers: regs.endUsers, Budgets: regs.budgets, AccessGroups: regs.accessGroups, Policies: regs.policies, Attachments: regs.attachments, Projects: regs.projects, Registries: regs.all, Supported: supported, Log: log,
		Limiter: limiter, Spend: tracker, SpendLogLines: cfg.GeneralSettings.SpendLogLines, Deployments: deployments,
		ModerationModel: cfg.GeneralSettings.ModerationModel,
		Version:         buildVersion(), Callbacks: cfg.LiteLLMSettings.callbacks(), ProxyBudget: proxyBudget,
		KeyRotation: rotateEvery,
	})
	if err := srv.EnsureProxyBudget(ctx, cfg.LiteLLMSettings.BudgetDuration); err != nil {
		log.Warn().Err(err).Msg("could not write the proxy budget user litellm-proxy-budget; it is enforced all the same")
	}
	if master == "" {
		log.Warn().Str("addr", addr).Msg("no master key set: every caller is admin, so only loopback addresses are served (set --master-key or GATEWAY_MASTER_KEY)")
	}
	if st == nil {
		log.Warn().Msg("no database configured: serving the config file only")
	}
	// bind first: "gateway serving" is logged only once the port is ours
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("serve: cannot listen on %s: address already in use (another process holds the port; stop it or pick another --addr)", addr)
		}
		return fmt.Errorf("serve: cannot listen on %s: %w", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Int("models", regs.models.Len()).Bool("database", st != nil).Msg("gateway serving")
	if err := srv.Serve(ctx, ln, 30*time.Second); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	log.Info().Msg("gateway stopped")
	return nil
}

// registries are the replica's registries. Adding one: a field here, one add call in
// newRegistries (its row builder and name index), and its Table in store.Tables.
type registries struct {
	models     *registry.Registry[*router.Deployment]
	guardrails *registry.Registry[*guardrail.Guardrail]
	agents     *registry.Registry[*a2a.Agent]
	keys       *registry.Registry[*keys.Key]
	orgs       *registry.Registry[*accounts.Organization]
	teams      *registry.Registry[*accounts.Team]
	users      *registry.Registry[*accounts.User]
	endUsers   *registry.Registry[*accounts.EndUser]
	budgets    *registry.Registry[*accounts.Budget]
	// accessGroups: LiteLLM's unified access groups (sql/016)
	accessGroups *registry.Registry[*accounts.AccessGroup]
	policies     *registry.Registry[*policy.Policy]
	// attachments are LiteLLM's policy attachments (sql/021), looked up by id only
	attachments *registry.Registry[*policy.Attachment]
	projects    *registry.Registry[*accounts.Project]

	all       []registry.Info // every registry, in store.Tables order
	st        *store.Store
	supported map[store.ObjectType]bool
	rto       readthrough.Options // read-through bounds of every registry
	log       zerolog.Logger
}

// sinks returns the registries the change feed applies to: those of supported types
// (supported_db_objects gates every DB path).
func (r *registries) sinks() []notify.Sink {
	var out []notify.Sink
	for _, reg := range r.all {
		if r.supported[reg.Type()] {
			out = append(out, reg)
		}
	}
	return out
}

// add builds the registry of typ from its row builder and name index (names may be nil: looked
// up by id only), with read-through from Postgres when typ is supported there.
func add[T any](r *registries, typ store.ObjectType, build func(store.Row) (T, error), names func(*registry.Entry[T]) []string) *registry.Registry[T] {
	var load func(context.Context, string) ([]store.Row, error)
	if r.st != nil && r.supported[typ] {
		st := r.st
		load = func(ctx context.Context, name string) ([]store.Row, error) { return st.LoadByName(ctx, typ, name) }
	}
	log := r.log
	reg := registry.New(registry.Options[T]{Type: typ, Build: build, Names: names, Load: load, ReadThrough: r.rto,
		OnApplyError: func(id string, err error) {
			log.Warn().Str("component", "registry").Str("type", string(typ)).Str("id", id).Err(err).Msg("invalid row not applied; the previous version, if any, keeps serving")
		}})
	r.all = append(r.all, reg)
	return reg
}

func newRegistries(st *store.Store, supported map[store.ObjectType]bool, rto readthrough.Options, log zerolog.Logger, models router.Builder) *registries {
	r := &registries{st: st, supported: supported, rto: rto, log: log}
	r.models = add(r, store.Model, models.BuildRow, router.Names)
	r.guardrails = add(r, store.Guardrail, guardrail.BuildRow, call.GuardrailNames)
	r.agents = add(r, store.Agent, a2a.BuildRow, api.AgentNames)
	r.keys = add(r, store.Key, keys.BuildRow, nil)
	r.orgs = add(r, store.Organization, accounts.BuildOrganizationRow, nil)
	r.teams = add(r, store.Team, accounts.BuildTeamRow, nil)
	r.users = add(r, store.User, accounts.BuildUserRow, nil)
	r.endUsers = add(r, store.EndUser, accounts.BuildEndUserRow, nil)
	r.budgets = add(r, store.Budget, accounts.BuildBudgetRow, nil)
	r.accessGroups = add(r, store.AccessGroup, accounts.BuildAccessGroupRow, nil)
	r.policies = add(r, store.Policy, policy.BuildRow, policy.Names)
	r.attachments = add(r, store.PolicyAttachment, policy.BuildAttachmentRow, nil)
	r.projects = add(r, store.Project, accounts.BuildProjectRow, nil)
	return r
}

// configModelID is LiteLLM-like: model_info.id when given, else a stable hash of the entry.
func configModelID(i int, m ModelConfig, params []byte) string {
	if id, ok := m.ModelInfo["id"].(string); ok && id != "" {
		return id
	}
	h := sha256.Sum256(append([]byte(fmt.Sprintf("%d|%s|", i, m.ModelName)), params...))
	return hex.EncodeToString(h[:16])
}

// configObjects are the config file's objects, built and validated before anything else
// starts, so a bad field fails fast with its name.
type configObjects struct {
	models     map[string]*router.Deployment
	guardrails map[string]*guardrail.Guardrail
	agents     map[string]*a2a.Agent
}

func buildConfigObjects(cfg *FileConfig, models router.Builder) (*configObjects, error) {
	co := &configObjects{models: map[string]*router.Deployment{}, guardrails: map[string]*guardrail.Guardrail{}, agents: map[string]*a2a.Agent{}}
	for i, m := range cfg.ModelList {
		field := fmt.Sprintf("config: model_list[%d]", i)
		params, err := toJSON(field+".litellm_params", m.LitellmParams)
		if err != nil {
			return nil, err
		}
		info, err := toJSON(field+".model_info", m.ModelInfo)
		if err != nil {
			return nil, err
		}
		id := configModelID(i, m, params)
		d, err := models.BuildConfig(id, m.ModelName, params, info)
		if err != nil {
			return nil, fmt.Errorf("config: model_list[%d] (%s): %w", i, m.ModelName, err)
		}
		co.models[id] = d
	}
	for i, g := range cfg.Guardrails {
		params, err := toJSON(fmt.Sprintf("config: guardrails[%d].litellm_params", i), g.LitellmParams)
		if err != nil {
			return nil, err
		}
		compiled, err := guardrail.Compile(g.GuardrailName, params)
		if err != nil {
			return nil, fmt.Errorf("config: guardrails[%d] (%s): %w", i, g.GuardrailName, err)
		}
		co.guardrails["config:"+g.GuardrailName] = compiled
	}
	for i, a := range cfg.Agents {
		id := firstNonEmpty(a.AgentID, a.AgentName)
		card, err := toJSON(fmt.Sprintf("config: agents[%d].agent_card_params", i), a.AgentCardParams)
		if err != nil {
			return nil, err
		}
		params, err := toJSON(fmt.Sprintf("config: agents[%d].litellm_params", i), a.LitellmParams)
		if err != nil {
			return nil, err
		}
		agent, err := a2a.NewAgent(id, a.AgentName, card, params)
		if err != nil {
			return nil, fmt.Errorf("config: agents[%d] (%s): %w", i, a.AgentName, err)
		}
		agent.FromConfig = true
		co.agents[id] = agent
	}
	return co, nil
}

func (co *configObjects) install(r *registries) {
	r.models.SetConfig(co.models)
	r.guardrails.SetConfig(co.guardrails)
	r.agents.SetConfig(co.agents)
}

func migrate(ctx context.Context, args []string) error {
	fs := newCommand("migrate", "gateway migrate [flags]",
		"Applies the SQL migrations (schema gateway) to the database and exits; safe to run again\n"+
			"and while replicas start (an advisory lock serializes them).")
	url := fs.String("database-url", "", "Postgres `URL` (env DATABASE_URL; required, no default)")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("migrate: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected argument %q", fs.Arg(0))
	}
	u := firstNonEmpty(*url, os.Getenv("DATABASE_URL"))
	if u == "" {
		return errors.New("migrate: --database-url (or DATABASE_URL) is required")
	}
	if err := checkDatabaseURL(dbURLSource(*url, os.Getenv("DATABASE_URL")), u); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	fmt.Println("migrations applied")
	return nil
}

// keyRotationEvery reads LiteLLM's key rotation settings: LITELLM_KEY_ROTATION_ENABLED
// ("true", any case, turns the job on; default off) and
// LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS (a whole number of seconds from 1 to 31536000,
// default 86400), as LiteLLM's proxy reads them (litellm/constants.py). 0: the job is off.
func keyRotationEvery() (time.Duration, error) {
	if !strings.EqualFold(strings.TrimSpace(os.Getenv("LITELLM_KEY_ROTATION_ENABLED")), "true") {
		return 0, nil
	}
	raw := strings.TrimSpace(os.Getenv("LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS"))
	if raw == "" {
		return admin.DefaultRotationCheck, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 365*24*3600 {
		return 0, fmt.Errorf("LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS: want a whole number of seconds from 1 to 31536000, got %q", raw)
	}
	return time.Duration(n) * time.Second, nil
}

// gcMinHeap is GATEWAY_GC_MIN_HEAP_MB (default 64, 0: off), in bytes: the Go heap a replica
// grows to before its first garbage collection, and below which it is not collected
// (pkg/gctune).
func gcMinHeap() (uint64, error) {
	raw := strings.TrimSpace(os.Getenv("GATEWAY_GC_MIN_HEAP_MB"))
	if raw == "" {
		return 64 << 20, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n > 1<<16 {
		return 0, fmt.Errorf("GATEWAY_GC_MIN_HEAP_MB: want a whole number of MiB from 0 (off) to 65536, got %q", raw)
	}
	return uint64(n) << 20, nil
}

// knobs are the governance test knobs read from the environment (documented as test knobs:
// production keeps the defaults).
type knobs struct {
	window     time.Duration // GATEWAY_LIMIT_WINDOW: rate-limit window length (default 1m)
	slotTTL    time.Duration // GATEWAY_LIMIT_SLOT_TTL: parallel-slot lease lifetime (default 10s)
	spendFlush time.Duration // GATEWAY_SPEND_FLUSH: longest wait of a spend log (default 200ms, at most 1s)
	// GATEWAY_CLUSTER_INTERVAL: period of the gateway.replicas upsert (default 2s, at most 1h;
	// a test sets it long to show the row is also written at every state change)
	clusterEvery time.Duration
}

func governanceKnobs() (knobs, error) {
	var k knobs
	for _, v := range []struct {
		env string
		dst *time.Duration
		max time.Duration
	}{{"GATEWAY_LIMIT_WINDOW", &k.window, 24 * time.Hour}, {"GATEWAY_LIMIT_SLOT_TTL", &k.slotTTL, time.Hour}, {"GATEWAY_SPEND_FLUSH", &k.spendFlush, time.Second}, {"GATEWAY_CLUSTER_INTERVAL", &k.clusterEvery, time.Hour}} {
		raw := os.Getenv(v.env)
		if raw == "" {
			continue
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < 100*time.Millisecond || d > v.max {
			return k, fmt.Errorf("%s: want a duration from 100ms to %s (a test knob), got %q", v.env, v.max, raw)
		}
		*v.dst = d
	}
	return k, nil
}
