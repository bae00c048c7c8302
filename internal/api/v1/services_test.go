package apiv1

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Services lists every service of the package's .proto files: each
// `service X {` of a .proto file here (the sources, not the registry
// Services reads, so that a file whose code was never generated shows),
// and nothing else.
func TestServicesListsEveryService(t *testing.T) {
	listed := map[protoreflect.FullName]bool{}
	for _, s := range Services() {
		listed[s.FullName()] = true
	}
	files, err := filepath.Glob("*.proto")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .proto files here: %v", err)
	}
	decl := regexp.MustCompile(`(?m)^service\s+(\w+)\s*\{`)
	n := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			n++
			if name := protoreflect.FullName("virtplane.v1." + m[1]); !listed[name] {
				t.Errorf("service %s of %s is not in Services()", name, f)
			}
		}
	}
	if n != len(listed) || n == 0 {
		t.Errorf("%d services in the package's .proto files, %d listed", n, len(listed))
	}
}
