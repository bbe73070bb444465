package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlSyntaxErr matches the parser's error text, "yaml: line N: problem" (yaml.v3 has no typed
// syntax error: decode.go's parser.fail formats it).
var yamlSyntaxErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlSyntaxError is err (from yaml.Unmarshal of raw) with the line of the problem. yaml.v3
// reports the line where the enclosing construct began (its context mark) rather than the
// problem's, e.g. line 1 for a mis-indented key on line 3 of a block sequence. The first line
// at which a prefix of raw stops parsing is also at or before the problem: the later of the
// two is reported.
func yamlSyntaxError(raw []byte, err error) error {
	m := yamlSyntaxErr.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	line, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(raw, []byte("\n"))
	var prefix []byte
	var node yaml.Node
	for i, l := range lines {
		prefix = append(prefix, l...)
		if i+1 < line || len(l) == 0 {
			continue
		}
		if yaml.Unmarshal(prefix, &node) != nil {
			line = i + 1
			break
		}
	}
	return fmt.Errorf("yaml: line %d: %s", line, m[2])
}
