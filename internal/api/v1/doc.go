// Package apiv1 holds the virtplane API: object types and gRPC services,
// generated from the .proto files in this directory by `make generate`.
package apiv1

//go:generate make -C ../../.. generate
