package provider

import (
	"bytes"
	"io"
	"mime/multipart"
)

// CheckMultipart is the body pass of a multipart/form-data request (the audio transcriptions
// routes; API.md "Request bodies": what is checked is what is sent). The fields the gateway
// routes on ("model") or guards (multipartTextFields: "prompt") must each come at most once
// and as a plain field: the gateway reads the first "model" while an upstream form parser
// (Python's, LiteLLM's) keeps the last, and a part with a filename is a file to the walkers
// (copied as is) but may still be read as the field upstream. Errors (400 *UpstreamError):
// `duplicate form field "<name>"`, `form field "<name>" must not be a file`, or what makes the
// body not a multipart form.
func CheckMultipart(body []byte) error {
	boundary := multipartBoundary(body)
	if boundary == "" {
		return badRequest("request body is not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var seenModel, seenText bool
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badRequest("malformed multipart body: %v", err)
		}
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
			return badRequest("form field %q must not be a file", name)
		}
		if *seen {
			return badRequest("duplicate form field %q", name)
		}
		*seen = true
	}
}
