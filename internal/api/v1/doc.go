// Package apiv1 holds the virtplane API: object types and gRPC services,
// generated from the .proto files in this directory by `make generate`.
package apiv1

//go:generate protoc -I ../../.. --go_out=../../.. --go_opt=module=github.com/virtplane/terraform-provider-virtplane --go-grpc_out=../../.. --go-grpc_opt=module=github.com/virtplane/terraform-provider-virtplane internal/api/v1/types.proto internal/api/v1/service.proto
