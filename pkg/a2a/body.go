package a2a

import (
	"errors"

	"lockstep/pkg/jsonscan"
)

// checkBody is the one body pass (API.md "Request bodies", jsonscan): nesting deeper than
// jsonscan.MaxDepth or invalid UTF-8 is a Parse error, a duplicate member (valid JSON by RFC
// 8259, but readers disagree on which one counts) an Invalid Request; both answered with HTTP
// 400. Other syntax errors are left to parseRequest (Parse error, as before).
func checkBody(body []byte) *Error {
	var je *jsonscan.Error
	if err := jsonscan.Check(body); !errors.As(err, &je) {
		return nil
	}
	switch je.Kind {
	case jsonscan.Duplicate:
		return invalidRequest("%s", je.Error())
	case jsonscan.TooDeep, jsonscan.InvalidUTF8:
		return newError(CodeParseError, "Parse error", "%s", je.Error())
	}
	return nil
}
