package admin

// Guardrail management (LiteLLM proxy litellm/proxy/guardrails/guardrail_endpoints.py): the
// rows of gateway.guardrails. Every write compiles the resulting litellm_params first
// (guardrail.Compile): a bad config is Invalid "Guardrail configuration error: ..." and nothing
// is written, so the serving version stays. After the commit the row is applied to this
// replica's registry when it is active, and removed from it otherwise (Writer.Hide: only
// 'active' rows are ever loaded, by any path); the other replicas get it through the change
// feed. Config-file guardrails (id "config:<name>") are never written here.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// StatusActive is the only gateway.guardrails.status that is ever served.
const StatusActive = "active"

var guardrailStatuses = []string{"active", "pending_review", "rejected"}

// PlainGuardrailParams are the content filter's own litellm_params members: never secrets,
// although blocked_words[].keyword and keyword_redaction_tag look like them to
// provider.MaskParams. Every other member (api_key, api_base, ... of other guardrail types) is
// masked in answers and restored when sent back masked.
var PlainGuardrailParams = []string{"guardrail", "mode", "default_on", "blocked_words", "blocked_words_file",
	"patterns", "categories", "keyword_redaction_tag", "pattern_redaction_format"}

// GuardrailWrite is a whole guardrail to store (POST, PUT).
type GuardrailWrite struct {
	Name   string
	Params []byte
	Info   []byte
	Status string // "" keeps the stored status (PUT); POST stores "active"
}

// GuardrailPatch is PATCH's guardrail object: nil or JSON-null fields keep the stored ones;
// DefaultOn is PATCH's shortcut for litellm_params.default_on (LiteLLM PatchGuardrailRequest).
type GuardrailPatch struct {
	Name      *string
	Params    json.RawMessage
	Info      json.RawMessage
	Status    *string
	DefaultOn *bool
}

// GuardrailRow is a gateway.guardrails row (row_to_json).
type GuardrailRow struct {
	ID        string          `json:"guardrail_id"`
	Name      string          `json:"guardrail_name"`
	Params    json.RawMessage `json:"litellm_params"`
	Info      json.RawMessage `json:"guardrail_info"`
	Status    string          `json:"status"`
	CreatedAt json.RawMessage `json:"created_at"`
	UpdatedAt json.RawMessage `json:"updated_at"`
}

// ParseGuardrailRow decodes a gateway.guardrails row.
func ParseGuardrailRow(r store.Row) (GuardrailRow, error) { return parseGuardrailRow(r) }

func parseGuardrailRow(r store.Row) (GuardrailRow, error) {
	var g GuardrailRow
	if err := json.Unmarshal(r.Data, &g); err != nil {
		return g, fmt.Errorf("guardrail row %q: %w", r.ID, err)
	}
	return g, nil
}

const (
	configGuardrailEditErr   = "Can't edit guardrail. Guardrail in config. Store guardrail in db via `POST /guardrails` to edit."
	configGuardrailDeleteErr = "Can't delete guardrail. Guardrail in config. Remove it from the config file instead."
)

func guardrailIDNotFound(id string) error { return notFound("Guardrail with ID %s not found", id) }

func guardrailNameTaken(name string) error {
	return invalid("guardrail_name", "Guardrail with name '%s' already exists", name)
}

// ConfigGuardrail returns the config-file guardrail with id, if any.
func (a *Admin) ConfigGuardrail(id string) (*registry.Entry[*guardrail.Guardrail], bool) {
	e, ok := a.guardrails.Load().ByID(id)
	if ok && e.Config {
		return e, true
	}
	return nil, false
}

// EditableGuardrail refuses a config-file guardrail (Invalid "Can't edit guardrail. ...").
func (a *Admin) EditableGuardrail(id string) error {
	if _, ok := a.ConfigGuardrail(id); ok {
		return invalidf(configGuardrailEditErr)
	}
	return nil
}

// DeletableGuardrail refuses a config-file guardrail (Invalid "Can't delete guardrail. ...").
func (a *Admin) DeletableGuardrail(id string) error {
	if _, ok := a.ConfigGuardrail(id); ok {
		return invalidf(configGuardrailDeleteErr)
	}
	return nil
}

// jsonKindOf returns the first non-space byte of a JSON value ('{', '[', '"', ...), 0 if empty.
func jsonKindOf(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// validateGuardrail checks a write before it touches the database: name, status,
// guardrail_info and, by compiling them exactly as the registry will, litellm_params.
func (a *Admin) validateGuardrail(w GuardrailWrite) error {
	if strings.TrimSpace(w.Name) == "" {
		return invalid("guardrail_name", "guardrail_name is required and cannot be empty")
	}
	if strings.ContainsFunc(w.Name, unicode.IsControl) {
		return invalid("guardrail_name", "guardrail_name must not contain control characters")
	}
	for _, e := range a.guardrails.Load().ByName(w.Name) {
		if e.Config {
			return invalid("guardrail_name", "Guardrail with name '%s' already exists in the config file; choose another guardrail_name", w.Name)
		}
	}
	if w.Status != "" && !slices.Contains(guardrailStatuses, w.Status) {
		return invalid("status", "status must be one of %s, got %q", strings.Join(guardrailStatuses, ", "), w.Status)
	}
	if jsonKindOf(w.Info) != '{' {
		return invalid("guardrail_info", "guardrail_info must be a JSON object")
	}
	if isNull(w.Params) {
		return invalid("litellm_params", "Guardrail configuration error: litellm_params is required")
	}
	if _, err := guardrail.Compile(w.Name, w.Params); err != nil {
		return invalid("litellm_params", "Guardrail configuration error: %v", err)
	}
	return nil
}

func (w GuardrailWrite) values() store.Values {
	v := store.Values{"guardrail_name": w.Name, "litellm_params": w.Params, "guardrail_info": w.Info}
	if w.Status != "" {
		v["status"] = w.Status
	}
	return v
}

// guardrailWriteErr maps a store error of a guardrail write.
func guardrailWriteErr(err error, id, name string) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return guardrailNameTaken(name)
	case errors.Is(err, store.ErrNotFound):
		return guardrailIDNotFound(id)
	case errors.Is(err, store.ErrInvalid):
		return invalidf("invalid guardrail: %v", err)
	}
	return err
}

// writeGuardrail records the apply of a written row: an active row is loaded, any other
// status removes the guardrail (version-guarded, like the change feed does).
func writeGuardrail(w *Writer, row store.Row) error {
	g, err := parseGuardrailRow(row)
	if err != nil {
		return err
	}
	if g.Status != StatusActive {
		w.Hide(row)
	}
	return nil
}

// CreateGuardrail is POST /guardrails: a new row (id a new uuid; status "active" unless
// given). Errors: Invalid (validateGuardrail's, a name taken), the store's.
func (a *Admin) CreateGuardrail(ctx context.Context, w GuardrailWrite) (store.Row, error) {
	if w.Status == "" {
		w.Status = StatusActive
	}
	if err := a.validateGuardrail(w); err != nil {
		return store.Row{}, err
	}
	id := uuid.NewString()
	vals := w.values()
	vals["guardrail_id"] = id
	var row store.Row
	err := a.Write(ctx, func(tx *Writer) error {
		var err error
		if row, err = tx.Insert(ctx, store.Guardrail, vals); err != nil {
			return err
		}
		return writeGuardrail(tx, row)
	})
	if err != nil {
		return store.Row{}, guardrailWriteErr(err, id, w.Name)
	}
	return row, nil
}

// errAbortTx rolls a transaction back after a validation error (kept aside, so the store's
// error mapping never sees it).
var errAbortTx = errors.New("guardrail write aborted")

// ReplaceGuardrail is PUT /guardrails/{id}: replaces name, litellm_params and guardrail_info
// (the caller makes absent info {}); the status changes only when given. A litellm_params
// secret sent back masked keeps the stored one (read under the table's write lock, as PATCH
// does). Errors: Invalid, NotFound "Guardrail with ID <id> not found".
func (a *Admin) ReplaceGuardrail(ctx context.Context, id string, w GuardrailWrite) (store.Row, error) {
	if err := a.EditableGuardrail(id); err != nil {
		return store.Row{}, err
	}
	if err := a.validateGuardrail(w); err != nil {
		return store.Row{}, err
	}
	var verr error
	var row store.Row
	err := a.Write(ctx, func(tx *Writer) error {
		cur, err := lockedGuardrail(ctx, tx, id)
		if err != nil {
			verr = err
			return errAbortTx
		}
		w.Params = provider.RestoreMaskedSecrets(w.Params, cur.Params, PlainGuardrailParams...)
		if row, err = tx.Update(ctx, store.Guardrail, id, w.values()); err != nil {
			return err
		}
		return writeGuardrail(tx, row)
	})
	if verr != nil {
		return store.Row{}, verr
	}
	if err != nil {
		return store.Row{}, guardrailWriteErr(err, id, w.Name)
	}
	return row, nil
}

// PatchGuardrail is PATCH /guardrails/{id}: merges the given litellm_params and
// guardrail_info keys over the stored ones, and sets guardrail_name, status and default_on
// when given. The read-modify-write runs in one transaction holding the table's write lock,
// so concurrent patches never lose each other's keys. Errors as ReplaceGuardrail.
func (a *Admin) PatchGuardrail(ctx context.Context, id string, patch GuardrailPatch) (store.Row, error) {
	if err := a.EditableGuardrail(id); err != nil {
		return store.Row{}, err
	}
	if _, err := objectOf(patch.Params, "litellm_params"); err != nil {
		return store.Row{}, err
	}
	infoPatch, err := objectOf(patch.Info, "guardrail_info")
	if err != nil {
		return store.Row{}, err
	}
	var verr error
	var row store.Row
	var name string
	err = a.Write(ctx, func(tx *Writer) error {
		cur, err := lockedGuardrail(ctx, tx, id)
		if err != nil {
			verr = err
			return errAbortTx
		}
		params, err := objectOf(cur.Params, "litellm_params")
		if err != nil {
			verr = err
			return errAbortTx
		}
		// a secret sent back masked keeps the stored one
		paramsPatch, _ := objectOf(provider.RestoreMaskedSecrets(patch.Params, cur.Params, PlainGuardrailParams...), "litellm_params")
		if patch.DefaultOn != nil {
			paramsPatch["default_on"] = *patch.DefaultOn
		}
		info, _ := objectOf(cur.Info, "guardrail_info")
		name = cur.Name
		if patch.Name != nil {
			name = *patch.Name
		}
		pj, _ := json.Marshal(mergeObjects(params, paramsPatch))
		ij, _ := json.Marshal(mergeObjects(info, infoPatch))
		status := ""
		if patch.Status != nil {
			status = *patch.Status
		}
		w := GuardrailWrite{Name: name, Params: pj, Info: ij, Status: status}
		if err := a.validateGuardrail(w); err != nil {
			verr = err
			return errAbortTx
		}
		if row, err = tx.Update(ctx, store.Guardrail, id, w.values()); err != nil {
			return err
		}
		return writeGuardrail(tx, row)
	})
	if verr != nil {
		return store.Row{}, verr
	}
	if err != nil {
		return store.Row{}, guardrailWriteErr(err, id, name)
	}
	return row, nil
}

// lockedGuardrail locks the guardrails table for writes (readers go on) and returns row id.
func lockedGuardrail(ctx context.Context, tx *Writer, id string) (GuardrailRow, error) {
	if err := tx.LockTable(ctx, store.Guardrail); err != nil {
		return GuardrailRow{}, err
	}
	rows, err := tx.List(ctx, store.Guardrail)
	if err != nil {
		return GuardrailRow{}, err
	}
	for _, r := range rows {
		if r.ID == id {
			return parseGuardrailRow(r)
		}
	}
	return GuardrailRow{}, guardrailIDNotFound(id)
}

// DeleteGuardrail is DELETE /guardrails/{id}; the tombstone is applied after commit.
// Errors: Invalid (a config-file guardrail), NotFound.
func (a *Admin) DeleteGuardrail(ctx context.Context, id string) error {
	if err := a.DeletableGuardrail(id); err != nil {
		return err
	}
	return a.deleteOne(ctx, store.Guardrail, id, guardrailIDNotFound)
}

// GuardrailRows reads every row of gateway.guardrails, every status, oldest first.
func (a *Admin) GuardrailRows(ctx context.Context) ([]store.Row, error) {
	return a.st.List(ctx, store.Guardrail)
}

// GuardrailRow reads the row of id (any status). NotFound "Guardrail with ID <id> not found".
func (a *Admin) GuardrailRow(ctx context.Context, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, store.Guardrail, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, guardrailIDNotFound(id)
	}
	return row, err
}

// GuardrailNotFound is the NotFound of an unknown guardrail id.
func GuardrailNotFound(id string) error { return guardrailIDNotFound(id) }
