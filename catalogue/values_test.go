package catalogue

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// idListArgs name every id-list parameter of 3.11.0's tools/list (the
// catalogue's test holds every parameter's type: ParamType).
func TestIDListArgsAreTheSchemas(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/tools-3.11.0.json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct {
			Name        string
			InputSchema struct {
				Properties map[string]struct {
					Type  string
					Items struct{ Type string }
				}
			}
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		for k, p := range tool.InputSchema.Properties {
			if p.Type == "array" && p.Items.Type == "string" && strings.HasSuffix(k, "_ids") && listOf[k] != "string" {
				t.Errorf("%s.%s lists ids, not in listOf", tool.Name, k)
			}
		}
	}
}
