package apiv1

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Services are the descriptors of every gRPC service of the API, by full
// name: those of every .proto file of package virtplane.v1, which this Go
// package registers. Code that must treat every method (the server's
// authorization table and services table, the client's retry policy, the
// CLI's table of kinds) ranges over these, so a service in a new file
// cannot be left out and no list of files needs editing.
func Services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage(File_internal_api_v1_service_proto.Package(), func(f protoreflect.FileDescriptor) bool {
		svcs := f.Services()
		for i := range svcs.Len() {
			out = append(out, svcs.Get(i))
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return out
}
