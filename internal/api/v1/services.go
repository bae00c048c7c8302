package apiv1

import "google.golang.org/protobuf/reflect/protoreflect"

// Services are the descriptors of every gRPC service of the API, from each
// .proto file that defines some: code that must treat every method (the
// server's authorization table, the client's retry policy) ranges over
// these, so a service in a new file cannot be left out.
func Services() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, f := range []protoreflect.FileDescriptor{
		File_internal_api_v1_service_proto,
		File_internal_api_v1_replicas_service_proto,
		File_internal_api_v1_snapshots_service_proto,
	} {
		svcs := f.Services()
		for i := range svcs.Len() {
			out = append(out, svcs.Get(i))
		}
	}
	return out
}
