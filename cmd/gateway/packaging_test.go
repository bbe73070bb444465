package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository root (this package is cmd/gateway).
const repoRoot = "../.."

// gatewayEnvNames are the environment variables the gateway reads: every string literal passed
// to os.Getenv or os.LookupEnv in the non-test Go files of cmd/ and pkg/.
func gatewayEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "pkg"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "os" {
					return true
				}
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					names[v] = true
				}
				return true
			})
			return nil
		}))
	}
	require.True(t, names["DATABASE_URL"] && names["GATEWAY_MASTER_KEY"], "the scan finds the gateway's env vars: %v", names)
	return names
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// interpolated matches a compose variable with a required value: ${NAME:?message}.
var interpolated = regexp.MustCompile(`^\$\{([A-Z_][A-Z0-9_]*):\?[^}]+\}$`)

// compose.yaml (docker compose, no daemon needed to check it): Postgres with wal_level=logical,
// a one-shot migrate step after Postgres is healthy, and two replicas started after it, whose
// flags serve really accepts, whose env names the gateway really reads, and whose database
// URL points at the Postgres service with its credentials.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "compose.yaml"))
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(raw, &c))
	env := gatewayEnvNames(t)

	pg, ok := c.Services["postgres"]
	require.True(t, ok, "a postgres service")
	require.Regexp(t, `^postgres:1[5-9]`, pg.Image)
	require.Contains(t, strings.Join(pg.Command, " "), "wal_level=logical", "the logical change source needs wal_level=logical")
	require.NotNil(t, pg.Healthcheck, "migrate waits for a healthy postgres")
	require.Contains(t, strings.Join(pg.Healthcheck.Test, " "), "pg_isready")

	wantURL := &url.URL{Scheme: "postgres", User: url.UserPassword(pg.Environment["POSTGRES_USER"], pg.Environment["POSTGRES_PASSWORD"]),
		Host: "postgres:5432", Path: "/" + pg.Environment["POSTGRES_DB"]}
	checkDB := func(name string, s composeService) {
		u, err := url.Parse(s.Environment["DATABASE_URL"])
		require.NoError(t, err, name)
		u.RawQuery = ""
		require.Equal(t, wantURL.String(), u.String(), "%s: DATABASE_URL points at the postgres service with its credentials", name)
	}

	mig, ok := c.Services["migrate"]
	require.True(t, ok, "a migrate service")
	require.Equal(t, []string{"migrate"}, mig.Command)
	require.Equal(t, "service_healthy", mig.DependsOn["postgres"].Condition)
	require.NotNil(t, mig.Build, "migrate builds the image from the Dockerfile")
	checkDB("migrate", mig)

	var replicas []string
	ids, ports := map[string]bool{}, map[string]bool{}
	for name, s := range c.Services {
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			continue
		}
		replicas = append(replicas, name)
		require.Equal(t, mig.Image, s.Image, "%s runs the image migrate built", name)
		require.Equal(t, "service_completed_successfully", s.DependsOn["migrate"].Condition, "%s starts after the migrations", name)
		f, err := parseServe(s.Command[1:])
		require.NoError(t, err, "%s: serve accepts the command line", name)
		require.True(t, f.noMigrate, "%s: migrations are the migrate service's job", name)
		for k, v := range s.Environment {
			require.True(t, env[k], "%s: the gateway reads no env var %s", name, k)
			if m := interpolated.FindStringSubmatch(v); m != nil {
				require.Equal(t, k, m[1], "%s: %s is taken from the same name in the caller's environment", name, k)
			}
		}
		require.Regexp(t, interpolated, s.Environment["GATEWAY_MASTER_KEY"], "%s: the master key is required from the caller, never a default", name)
		checkDB(name, s)
		id := s.Environment["GATEWAY_REPLICA_ID"]
		require.NotEmpty(t, id, name)
		require.False(t, ids[id], "%s: replica id %s is used twice", name, id)
		ids[id] = true
		require.Len(t, s.Ports, 1, name)
		host, container, ok := strings.Cut(s.Ports[0], ":")
		require.True(t, ok, name)
		require.False(t, ports[host], "%s: host port %s is published twice", name, host)
		ports[host] = true
		require.Equal(t, "0.0.0.0:"+container, f.addr, "%s: the published port is the one serve listens on", name)
		// issue 23: a health check by the binary itself (distroless has no curl), on serve's port
		require.NotNil(t, s.Healthcheck, "%s: a healthcheck", name)
		hc := s.Healthcheck.Test
		require.GreaterOrEqual(t, len(hc), 3, name)
		require.Equal(t, []string{"CMD", "/usr/local/bin/gateway", "healthcheck"}, hc[:3], "%s: the healthcheck runs gateway healthcheck", name)
		if i := slices.Index(hc, "--url"); i >= 0 {
			u, err := url.Parse(hc[i+1])
			require.NoError(t, err, name)
			require.Equal(t, container, u.Port(), "%s: the healthcheck asks serve's port", name)
			require.Equal(t, "/health/readiness", u.Path, name)
		}
	}
	require.Len(t, replicas, 2, "two gateway replicas")
}

// The Dockerfile (checked without a daemon): multi-stage, the Go version of go.mod, a static
// build (CGO_ENABLED=0) of this module's gateway command, the binary copied from the build
// stage into a minimal final stage that runs as a non-root user.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	modRaw, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	modPath := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(modRaw)
	goLine := regexp.MustCompile(`(?m)^go\s+(\d+\.\d+)`).FindSubmatch(modRaw)
	require.NotNil(t, modPath, "go.mod names the module")
	require.NotNil(t, goLine, "go.mod names the Go version")

	// join continuation lines, drop comments
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || (l == "" && cur == "") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		lines = append(lines, strings.TrimSpace(cur+l))
		cur = ""
	}

	type stage struct {
		from, name string
		lines      []string
	}
	var stages []*stage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		if strings.EqualFold(instr, "FROM") {
			f := strings.Fields(rest)
			s := &stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		require.NotEmpty(t, stages, "instruction before FROM: %s", l)
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, l)
	}
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage build")
	build, final := stages[0], stages[len(stages)-1]

	minor := string(goLine[1]) // go 1.26.8 → golang:1.26
	require.True(t, strings.HasPrefix(build.from, "golang:"+minor), "build stage %s uses Go %s (go.mod)", build.from, minor)
	require.NotEmpty(t, build.name)

	var buildCmd string
	for _, l := range build.lines {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			buildCmd = l
		}
	}
	require.NotEmpty(t, buildCmd, "the build stage runs go build")
	require.Contains(t, buildCmd, "CGO_ENABLED=0", "a static binary")
	f := strings.Fields(buildCmd)
	pkg := f[len(f)-1]
	require.True(t, pkg == "./cmd/gateway" || pkg == string(modPath[1])+"/cmd/gateway", "go build builds this module's gateway (%s), got %s", string(modPath[1]), pkg)
	out := f[slices.Index(f, "-o")+1]

	require.NotEqual(t, build.from, final.from)
	require.Regexp(t, `^(gcr\.io/distroless/static|scratch|alpine)`, final.from, "a minimal final image")
	// issue 23: the version is stamped from the build args (.git is not in the context)
	for _, v := range []string{"main.version=${VERSION}", "main.commit=${COMMIT}", "main.buildTime=${BUILD_TIME}"} {
		require.Contains(t, buildCmd, "-X "+v, "go build stamps %s", v)
	}
	var copied, user, entry, health string
	for _, l := range final.lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "COPY":
			if strings.HasPrefix(rest, "--from="+build.name+" "+out+" ") {
				copied = strings.Fields(rest)[2]
			}
		case "USER":
			user = rest
		case "ENTRYPOINT":
			entry = rest
		case "HEALTHCHECK":
			health = rest
		case "ENV":
			k, _, _ := strings.Cut(rest, "=")
			require.True(t, gatewayEnvNames(t)[k], "the gateway reads no env var %s", k)
		}
	}
	require.NotEmpty(t, copied, "the final stage copies %s from stage %s", out, build.name)
	require.NotEmpty(t, user, "the final stage sets USER")
	uid, _, _ := strings.Cut(user, ":")
	require.NotContains(t, []string{"root", "0"}, uid, "runs as a non-root user")
	require.Equal(t, `["`+copied+`"]`, entry, "the entrypoint is the copied binary")
	// issue 23: distroless has no curl; the image checks itself with `gateway healthcheck`
	require.Contains(t, health, `CMD ["`+copied+`", "healthcheck"]`, "HEALTHCHECK names gateway healthcheck")
}
