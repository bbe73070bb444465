package admin

// Scheduled key rotation, as LiteLLM's proxy does it (litellm/proxy/common_utils/
// key_rotation_manager.py KeyRotationManager; key_management_endpoints.py
// _set_key_rotation_fields, _calculate_key_rotation_time; docs "Scheduled Key Rotations"):
//
//   - /key/generate and /key/update take auto_rotate (bool) and rotation_interval (a LiteLLM
//     duration, "30s", "1h", "30d", "1mo"); when a request sets auto_rotate true together
//     with a rotation_interval, the key's key_rotation_at becomes now + rotation_interval.
//     All of them live in the key's litellm_fields (sql/011, sql/018).
//   - Every check interval (LiteLLM's LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS, default
//     24 h) the job rotates each key with auto_rotate true, a rotation_interval and a
//     key_rotation_at that has passed (or none: LiteLLM's _should_rotate_key rotates it at
//     once) through /key/regenerate's own write (Writer.regenerate): the key gets a new random
//     value, its settings and spend move with it, the old value is refused on every replica
//     at once (the change feed's tombstone). The new row gets rotation_count + 1,
//     last_rotation_at now and key_rotation_at now + rotation_interval, in the same
//     statement. LiteLLM's default is an immediate revoke of the old value (its
//     LITELLM_KEY_ROTATION_GRACE_PERIOD, empty by default, is not supported).
//   - One replica rotates at a time: each batch is one transaction that first takes the
//     advisory lock keyRotationLock with pg_try_advisory_xact_lock (the spend-log retention's
//     pattern, store.PruneSpendLogs); a replica that does not get it skips the run. The due
//     keys are read inside that transaction after the lock, so a key is rotated once per due
//     time however many replicas run the job (LiteLLM holds a Redis pod lock instead).
//   - The new value is returned to nobody (LiteLLM hands it only to a configured secret
//     manager or its key-rotated email, neither of which lockstep has): the new token
//     (token_id) and the rotation fields are visible in /key/info and /key/list.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

// keyRotationLock names the advisory lock a rotation batch holds.
const keyRotationLock = "lockstep.key_rotation"

// RotationBatch is the most keys one rotation transaction rotates.
const RotationBatch = 100

// DefaultRotationCheck is how often the job looks for due keys (LiteLLM's
// LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS default, 86400).
const DefaultRotationCheck = 24 * time.Hour

// rotationTime renders t as key_rotation_at and last_rotation_at are stored.
func rotationTime(t time.Time) string { return t.UTC().Format(store.RotationTimeLayout) }

// CheckRotation completes a /key/generate or /key/update request's rotation fields (extra:
// its LiteLLM fields, already checked against their kinds: auto_rotate a bool,
// rotation_interval a duration string): when auto_rotate is true and rotation_interval is
// given, key_rotation_at is set to now + rotation_interval (LiteLLM's
// _set_key_rotation_fields; otherwise key_rotation_at is left as stored). Errors: Invalid
// naming rotation_interval (keys.DurationError: `rotation_interval: "<v>" is not a duration ...`).
func CheckRotation(extra map[string]json.RawMessage, now time.Time) error {
	var interval string
	if raw, ok := extra["rotation_interval"]; ok {
		_ = json.Unmarshal(raw, &interval) // the kind check made it a string or null
	}
	var d time.Duration
	if interval != "" {
		var err error
		if d, err = keys.ParseDuration(interval); err != nil {
			return invalid("rotation_interval", "%s", keys.DurationError("rotation_interval", err))
		}
	}
	var on bool
	if raw, ok := extra["auto_rotate"]; ok {
		_ = json.Unmarshal(raw, &on)
	}
	if on && d > 0 {
		b, _ := json.Marshal(rotationTime(now.Add(d)))
		extra["key_rotation_at"] = b
	}
	return nil
}

// rotationFields are the rotation members of a key row's litellm_fields.
type rotationFields struct {
	RotationInterval string `json:"rotation_interval"`
	RotationCount    int64  `json:"rotation_count"`
}

// RotateDueKeys rotates up to batch keys due at now (see the file comment), in one
// transaction holding the rotation lock. ran is false when another replica holds the lock
// (nothing was rotated). A due key whose rotation_interval no longer parses (written with
// psql) has auto_rotate turned off rather than being rotated at every check. Errors: the
// store's (nothing is rotated then).
func (a *Admin) RotateDueKeys(ctx context.Context, now time.Time, batch int) (rotated int, ran bool, err error) {
	err = a.Write(ctx, func(w *Writer) error {
		rotated = 0
		if ran, err = w.tx.TryLockName(ctx, keyRotationLock); err != nil || !ran {
			return err
		}
		due, err := w.tx.DueKeyRotations(ctx, rotationTime(now), batch)
		if err != nil {
			return err
		}
		for _, old := range due {
			var row struct {
				LitellmFields rotationFields `json:"litellm_fields"`
			}
			if err := json.Unmarshal(old.Data, &row); err != nil {
				return err
			}
			f := row.LitellmFields
			d, perr := keys.ParseDuration(f.RotationInterval)
			if perr != nil {
				if _, err := w.Update(ctx, store.Key, old.ID, store.Values{"litellm_fields": store.JSONMerge(`{"auto_rotate": false}`)}); err != nil {
					return err
				}
				continue
			}
			b, _ := json.Marshal(map[string]any{
				"rotation_count": f.RotationCount + 1, "last_rotation_at": rotationTime(now),
				"key_rotation_at": rotationTime(now.Add(d)),
			})
			if _, err := w.regenerate(ctx, old, keys.Hash(keys.Generate()), store.Values{"litellm_fields": store.JSONMerge(b)}); err != nil {
				return err
			}
			rotated++
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return rotated, ran, nil
}

// RotateKeysOnce runs RotateDueKeys batch after batch until one comes back short, another
// replica holds the lock, or ctx ends; it returns how many keys this replica rotated.
func (a *Admin) RotateKeysOnce(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, ran, err := a.RotateDueKeys(ctx, now, RotationBatch)
		total += n
		if err != nil || !ran || n < RotationBatch {
			return total, err
		}
	}
	return total, ctx.Err()
}

// RunKeyRotation runs the rotation job every check interval until ctx ends (every <= 0:
// DefaultRotationCheck); the first run is one interval after start, as LiteLLM's scheduler
// adds the job. A failed run is logged and retried at the next interval.
func (a *Admin) RunKeyRotation(ctx context.Context, every time.Duration, log zerolog.Logger) {
	if every <= 0 {
		every = DefaultRotationCheck
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := a.RotateKeysOnce(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Int("rotated", n).Msg("key rotation: run failed; retried at the next interval")
		} else if n > 0 {
			log.Info().Int("rotated", n).Msg("key rotation: rotated the keys due")
		}
	}
}
