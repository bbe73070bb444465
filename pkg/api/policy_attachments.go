package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
)

// Guardrail policy attachments (LiteLLM's /policies/attachments routes,
// policy_engine/policy_endpoints.py; the use-cases are admin/policy_attachments.go): decoding
// and answers, in LiteLLM's {"detail": {"error": msg}} envelope. An attachment is answered as
// LiteLLM's PolicyAttachmentDBResponse: attachment_id, policy_name, scope ("*" or null),
// teams, keys, models, tags (lists, [] when none), created_at, updated_at, created_by,
// updated_by.
//
//	POST   /policies/attachments                     the new attachment
//	GET    /policies/attachments/list                {"attachments": [attachment...], "total_count": n}, newest first
//	GET    /policies/attachments/:attachment_id      the attachment
//	DELETE /policies/attachments/:attachment_id      {"message": "Attachment <id> deleted successfully"}

// attachmentFields are the fields of LiteLLM's PolicyAttachmentCreateRequest.
var attachmentFields = fields{
	"policy_name": fString, "scope": fString, "teams": fStrings, "keys": fStrings, "models": fStrings, "tags": fStrings,
}

func (s *Server) attachmentRoutes() {
	s.detailRoute(http.MethodPost, "/policies/attachments", "policy attachments", s.attachmentCreate)
	s.detailRoute(http.MethodGet, "/policies/attachments/list", "policy attachments", s.attachmentList)
	s.detailRoute(http.MethodGet, "/policies/attachments/:attachment_id", "policy attachments", s.attachmentGet)
	s.detailRoute(http.MethodDelete, "/policies/attachments/:attachment_id", "policy attachments", s.attachmentDelete)
}

// attachmentJSON is an attachment row as LiteLLM answers it (without the row version).
func attachmentJSON(r mgmt.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	return m, nil
}

// attachmentOK answers one attachment row (200).
func attachmentOK(c echo.Context, r mgmt.Row) error {
	m, err := attachmentJSON(r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// attachmentCreate: POST /policies/attachments {"policy_name", "scope"? ("*"), "teams"?,
// "keys"?, "models"?, "tags"?} → the new attachment (200). 400 naming the field: a missing
// policy_name, a scope other than "*", nothing to attach to, a bad list; 404 `Policy '<n>'
// not found. Create the policy first.` (LiteLLM's).
func (s *Server) attachmentCreate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAttachment, "policy attachments"); err != nil {
		return err
	}
	body, err := decodeFields(c, attachmentFields)
	if err != nil {
		return err
	}
	in := mgmt.AttachmentInput{Policy: str(body, "policy_name"), Teams: strs(body, "teams"), Keys: strs(body, "keys"),
		Models: strs(body, "models"), Tags: strs(body, "tags")}
	if raw, ok := body["scope"]; ok && !isNull(raw) {
		v := str(body, "scope")
		in.Scope = &v
	}
	row, err := s.mgmt.NewAttachment(c.Request().Context(), mgmtCaller(caller(c)), in)
	if err != nil {
		return err
	}
	return attachmentOK(c, row)
}

// attachmentList: GET /policies/attachments/list → {"attachments": [...], "total_count": n},
// newest first.
func (s *Server) attachmentList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAttachment, "policy attachments"); err != nil {
		return err
	}
	rows, err := s.mgmt.Attachments(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := attachmentJSON(r)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, map[string]any{"attachments": out, "total_count": len(out)})
}

// attachmentGet: GET /policies/attachments/:attachment_id → the attachment; unknown: 404
// `Attachment with ID <id> not found`.
func (s *Server) attachmentGet(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAttachment, "policy attachments"); err != nil {
		return err
	}
	row, err := s.mgmt.Attachment(c.Request().Context(), c.Param("attachment_id"))
	if err != nil {
		return err
	}
	return attachmentOK(c, row)
}

// attachmentDelete: DELETE /policies/attachments/:attachment_id → {"message": "Attachment <id>
// deleted successfully"} (LiteLLM's text); unknown: 404.
func (s *Server) attachmentDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAttachment, "policy attachments"); err != nil {
		return err
	}
	id := c.Param("attachment_id")
	if _, err := s.mgmt.DeleteAttachment(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"message": "Attachment " + id + " deleted successfully"})
}
