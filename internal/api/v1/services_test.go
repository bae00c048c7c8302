package apiv1

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Services lists every service of the package's .proto files, so a new
// file with services must be added to it.
func TestServicesListsEveryService(t *testing.T) {
	listed := map[protoreflect.FullName]bool{}
	for _, s := range Services() {
		listed[s.FullName()] = true
	}
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("virtplane.v1", func(f protoreflect.FileDescriptor) bool {
		svcs := f.Services()
		for i := range svcs.Len() {
			n++
			if s := svcs.Get(i); !listed[s.FullName()] {
				t.Errorf("service %s of %s is not in Services()", s.FullName(), f.Path())
			}
		}
		return true
	})
	if n != len(listed) || n == 0 {
		t.Errorf("%d services in the package, %d listed", n, len(listed))
	}
}
