// Package examples ships the planning problem `draxr simulate` runs when
// given no files.
package examples

import _ "embed"

// Builtin is the built-in example, multi-document YAML.
//
//go:embed builtin.yaml
var Builtin []byte

// BuiltinName names the example in messages.
const BuiltinName = "built-in example"
