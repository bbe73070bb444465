package format

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"strings"
)

// CheckMultipart is the body pass of a multipart/form-data request (the audio transcriptions
// routes; API.md "Request bodies": what is checked is what is sent). The fields the gateway
// routes on ("model") or guards (multipartTextFields: "prompt") must each come at most once
// and as a plain field: the gateway reads the first "model" while an upstream form parser
// (Python's, LiteLLM's) keeps the last, and a part with a filename is a file to the walkers
// (copied as is) but may still be read as the field upstream. Errors (*RequestError):
// `duplicate form field "<name>"`, `form field "<name>" must not be a file`,
// `malformed multipart body: part <i>: <reason>` for a part whose name readers may disagree on
// (partNameError), or what makes the body not a multipart form.
func CheckMultipart(body []byte) error {
	boundary := MultipartBoundary(body)
	if boundary == "" {
		return BadRequest("request body is not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var seenModel, seenText bool
	part := 0
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return BadRequest("malformed multipart body: %v", err)
		}
		if err := partNameError(p.Header); err != "" {
			return BadRequest("malformed multipart body: part %d: %s", part, err)
		}
		part++
		name := p.FormName()
		var seen *bool
		switch {
		case name == "model":
			seen = &seenModel
		case multipartTextFields[name]:
			seen = &seenText // one text field today ("prompt")
		default:
			continue
		}
		if p.FileName() != "" {
			return BadRequest("form field %q must not be a file", name)
		}
		if *seen {
			return BadRequest("duplicate form field %q", name)
		}
		*seen = true
	}
}

// partNameError is why readers may disagree on a part's form name, "" when they cannot: more
// than one Content-Disposition header, one Go's mime.ParseMediaType refuses (a repeated
// parameter: form-data; name="x"; name="model" is no name to Go, "model" to python-multipart,
// which keeps the last), or an RFC 2231 name* parameter (Go decodes it and lets it win over
// name, python-multipart reads name). filename* stays allowed (non-ASCII file names).
func partNameError(h map[string][]string) string {
	cds := h["Content-Disposition"]
	if len(cds) > 1 {
		return "more than one Content-Disposition header"
	}
	if len(cds) == 0 {
		return ""
	}
	if _, _, err := mime.ParseMediaType(cds[0]); err != nil {
		return "Content-Disposition: " + err.Error()
	}
	for _, param := range strings.Split(cds[0], ";") {
		k, _, _ := strings.Cut(param, "=")
		if k = strings.ToLower(strings.TrimSpace(k)); strings.HasPrefix(k, "name*") {
			return "Content-Disposition: the form name must be a plain name= parameter"
		}
	}
	return ""
}
