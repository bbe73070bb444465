package format

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"strings"
)

// multipartBoundary returns the boundary of a multipart/form-data body, read from its first
// line ("--<boundary>", RFC 2046 §5.1.1), or "" when the body does not start with one.
func MultipartBoundary(body []byte) string {
	line, _, _ := bytes.Cut(body, []byte("\n"))
	line = bytes.TrimRight(line, "\r")
	b, ok := bytes.CutPrefix(line, []byte("--"))
	if !ok || len(b) == 0 || len(b) > 70 {
		return ""
	}
	return string(b)
}

func MultipartContentType(body []byte) string {
	return "multipart/form-data; boundary=" + MultipartBoundary(body)
}

// MultipartModel returns the "model" field of a multipart/form-data request body (the
// /audio/transcriptions route), or "" when there is none. Errors say why the body is not a
// multipart form.
func MultipartModel(body []byte) (string, error) {
	boundary := MultipartBoundary(body)
	if boundary == "" {
		return "", BadRequest("request body is not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return "", nil
		}
		if err != nil {
			return "", BadRequest("malformed multipart body: %v", err)
		}
		if p.FormName() == "model" {
			v, err := io.ReadAll(io.LimitReader(p, 1024))
			if err != nil {
				return "", BadRequest("malformed multipart body: %v", err)
			}
			return strings.TrimSpace(string(v)), nil
		}
	}
}

// rewriteMultipartModel replaces the value of the "model" field of a multipart/form-data body,
// keeping the boundary and every other part (headers and bytes) as they are.
func RewriteMultipartModel(body []byte, model string) ([]byte, error) {
	out, _, err := editMultipart(body, func(name string) bool { return name == "model" },
		func(string, string) (string, bool, error) { return model, false, nil })
	return out, err
}

// multipartEdit returns the new value of one selected form field, or drop to remove the part;
// an error stops the edit and is returned as is.
type multipartEdit func(name, value string) (out string, drop bool, err error)

// maxMultipartField bounds the value of a form field read for editing (a prompt, a model
// name, guardrail names); the audio file is never read into a string.
const maxMultipartField = 1 << 20

// editMultipart rebuilds a multipart/form-data body with the fields select picks (by form
// name; file parts never) passed through edit: each is replaced by edit's value or dropped.
// Every other part keeps its headers and bytes, and the boundary stays the same. It returns
// body itself (changed false) when edit changed nothing. Malformed bodies are a
// *RequestError; edit's errors are returned as they are.
func editMultipart(body []byte, sel func(name string) bool, edit multipartEdit) ([]byte, bool, error) {
	boundary := MultipartBoundary(body)
	if boundary == "" {
		return nil, false, BadRequest("request body is not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var out bytes.Buffer
	out.Grow(len(body) + 64)
	mw := multipart.NewWriter(&out)
	if err := mw.SetBoundary(boundary); err != nil {
		return nil, false, BadRequest("multipart boundary: %v", err)
	}
	changed := false
	for {
		p, err := mr.NextRawPart() // raw: no Content-Transfer-Encoding decoding
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, BadRequest("malformed multipart body: %v", err)
		}
		if p.FileName() != "" || !sel(p.FormName()) {
			w, err := mw.CreatePart(p.Header)
			if err != nil {
				return nil, false, BadRequest("multipart part: %v", err)
			}
			if _, err := io.Copy(w, p); err != nil {
				return nil, false, BadRequest("malformed multipart body: %v", err)
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxMultipartField+1))
		if err != nil {
			return nil, false, BadRequest("malformed multipart body: %v", err)
		}
		if len(v) > maxMultipartField {
			return nil, false, BadRequest("multipart field %q is longer than %d bytes", p.FormName(), maxMultipartField)
		}
		nv, drop, err := edit(p.FormName(), string(v))
		if err != nil {
			return nil, false, err
		}
		if drop {
			changed = true
			continue
		}
		changed = changed || nv != string(v)
		w, err := mw.CreatePart(p.Header)
		if err != nil {
			return nil, false, BadRequest("multipart part: %v", err)
		}
		if _, err := io.WriteString(w, nv); err != nil {
			return nil, false, BadRequest("multipart body: %v", err)
		}
	}
	if !changed {
		return body, false, nil
	}
	if err := mw.Close(); err != nil {
		return nil, false, BadRequest("multipart body: %v", err)
	}
	return out.Bytes(), true, nil
}

// multipartTextFields are the form fields of a multipart request (audio transcriptions) whose
// values a client wrote as text for the model: the transcription "prompt" (text locations,
// textloc.go).
var multipartTextFields = map[string]bool{"prompt": true}

// mapMultipartText is MapRequestText for a multipart/form-data body: each text field
// (multipartTextFields) goes through fn, and the body is rebuilt with the edited fields only.
func mapMultipartText(body []byte, fn TextFunc) ([]byte, error) {
	out, _, err := editMultipart(body, func(name string) bool { return multipartTextFields[name] },
		func(_, v string) (string, bool, error) {
			if v == "" {
				return v, false, nil
			}
			nv, err := fn(Text{Value: v})
			return nv, false, err
		})
	return out, err
}

// MultipartGuardrails reads the guardrails a multipart/form-data request names — "guardrails"
// form fields (also "guardrails[]"), each a JSON array of names or a comma-separated list —
// and returns them with the body without those fields (body itself when it has none; found
// reports whether any such field was present). Errors name what is malformed (400).
func MultipartGuardrails(body []byte) (names []string, found bool, out []byte, err error) {
	if !bytes.Contains(body, []byte(`name="guardrails`)) {
		return nil, false, body, nil // hot path: no such field, the form is not parsed
	}
	out, found, err = editMultipart(body, func(name string) bool { return name == "guardrails" || name == "guardrails[]" },
		func(_, v string) (string, bool, error) {
			v = strings.TrimSpace(v)
			if strings.HasPrefix(v, "[") {
				var list []string
				if err := json.Unmarshal([]byte(v), &list); err != nil {
					return "", false, BadRequest("guardrails must be an array of guardrail names")
				}
				names = append(names, list...)
				return "", true, nil
			}
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			return "", true, nil
		})
	return names, found, out, err
}
