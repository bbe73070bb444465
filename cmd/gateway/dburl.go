package main

import (
	"fmt"
	"strings"

	"lockstep/pkg/store"
)

// checkDatabaseURL checks a Postgres connection string before any connection is tried, so a
// malformed one reads as a URL error, not as "database unreachable". from names where it came
// from (--database-url, DATABASE_URL, general_settings.database_url). A URL's scheme must be
// postgres:// or postgresql:// (libpq, PostgreSQL docs 34.1.1 "Connection Strings"); a DSN
// (key=value ...) has none. The rest is parsed as the pool parses it (store.ParseConnConfig;
// its message shows the URL with the password masked).
func checkDatabaseURL(from, u string) error {
	if scheme, _, ok := strings.Cut(u, "://"); ok && scheme != "postgres" && scheme != "postgresql" {
		return fmt.Errorf("%s: scheme %q is not PostgreSQL's (want postgres:// or postgresql://)", from, scheme)
	}
	if _, err := store.ParseConnConfig(u); err != nil {
		return fmt.Errorf("%s: not a valid Postgres URL: %w", from, err)
	}
	return nil
}

// dbURLSource names the setting the database URL came from: the first of flag, env and config
// that is set.
func dbURLSource(flagVal, envVal string) string {
	switch {
	case flagVal != "":
		return "--database-url"
	case envVal != "":
		return "DATABASE_URL"
	}
	return "general_settings.database_url"
}
