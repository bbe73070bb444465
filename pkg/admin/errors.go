package admin

import "fmt"

// The use-cases' errors. Each carries the message the caller is answered with, word for word
// (the texts are the LiteLLM-compatible contract, /work/shared/API.md); pkg/api maps the type
// to the status (NotFound 404, Conflict 409, Invalid 400, Forbidden 403, Unavailable 503). Errors of the store
// (store.ErrUnavailable, ErrInvalid, ...) are returned as they come.

// NotFound: the object the request names does not exist.
type NotFound struct{ Msg string }

func (e *NotFound) Error() string { return e.Msg }

// Conflict: the object already exists, or the write clashes with the stored state.
type Conflict struct{ Msg string }

func (e *Conflict) Error() string { return e.Msg }

// Invalid: the input is refused; Field names the input at fault when there is one.
type Invalid struct {
	Field string
	Msg   string
}

func (e *Invalid) Error() string { return e.Msg }

// Unavailable: what the request needs is not there on this gateway (no database configured).
type Unavailable struct{ Msg string }

func (e *Unavailable) Error() string { return e.Msg }

// Forbidden: the caller may not do this.
type Forbidden struct{ Msg string }

func (e *Forbidden) Error() string { return e.Msg }

func notFound(format string, args ...any) error {
	return &NotFound{Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &Conflict{Msg: fmt.Sprintf(format, args...)}
}

func invalid(field, format string, args ...any) error {
	return &Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}
