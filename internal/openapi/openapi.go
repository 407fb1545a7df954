// Package openapi describes the daemon's HTTP API as an OpenAPI 3.1 document
// and its wire types as TypeScript declarations, both generated from one
// source: the Go types of packages protocol and app (reflected into JSON
// Schema) and the table of operations in this package.
package openapi

// JSON is the OpenAPI document.
func JSON() ([]byte, error) { return []byte(`{"openapi":"3.1.0"}`), nil }
