package catalogue

import (
	"os"
	"strings"
	"testing"
)

// docs/api.md shows the catalogue as it is (regenerate the table with Markdown()).
func TestCatalogueDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), Markdown()) {
		t.Fatalf("docs/api.md does not carry the catalogue table; want:\n%s", Markdown())
	}
	if len(order) != len(Models) {
		t.Fatalf("order lists %d models, the catalogue has %d", len(order), len(Models))
	}
}
