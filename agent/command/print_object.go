package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// object is any API object the CLI prints.
type object interface {
	proto.Message
	GetMetadata() *apiv1.ObjectMeta
}

// Output formats of get -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	// formatWide is the table with the columns of wideHeader added; get
	// only.
	formatWide = "wide"
)

func checkFormat(f string) error {
	switch f {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return fmt.Errorf("unsupported output format %q (want table, json or yaml)", f)
}

// marshalOptions gives snake_case names, as in manifests and validation
// errors, and leaves out empty fields.
var marshalOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// kindOf is the message name, which is the kind ("VirtualMachine").
func kindOf(m proto.Message) string {
	return string(m.ProtoReflect().Descriptor().Name())
}

// objectJSON is protojson of m with a leading "kind" field, compact.
func objectJSON(m proto.Message) ([]byte, error) {
	body, err := marshalOptions.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kindOf(m), err)
	}
	kind, _ := json.Marshal(kindOf(m))
	var b bytes.Buffer
	b.WriteString(`{"kind":`)
	b.Write(kind)
	body = bytes.TrimSpace(body)
	// body is "{...}"; splice its fields in after kind.
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		b.WriteByte(',')
		b.Write(inner)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// listJSON is {"kind":"List","items":[...]}, compact.
func listJSON(items []object) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"kind":"List","items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := objectJSON(it)
		if err != nil {
			return nil, err
		}
		b.Write(j)
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// printObject writes one object as json or yaml.
func printObject(w io.Writer, format string, obj object) error {
	j, err := objectJSON(obj)
	if err != nil {
		return err
	}
	return writeJSONAs(w, format, j)
}

// printList writes objects as a kind: List in json or yaml.
func printList(w io.Writer, format string, items []object) error {
	j, err := listJSON(items)
	if err != nil {
		return err
	}
	return writeJSONAs(w, format, j)
}

// writeJSONAs re-indents compact JSON (protojson's own whitespace is
// deliberately unstable) or converts it to YAML.
func writeJSONAs(w io.Writer, format string, j []byte) error {
	var out []byte
	switch format {
	case formatJSON:
		var b bytes.Buffer
		if err := json.Indent(&b, j, "", "    "); err != nil {
			return fmt.Errorf("format json: %w", err)
		}
		b.WriteByte('\n')
		out = b.Bytes()
	case formatYAML:
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return fmt.Errorf("format yaml: %w", err)
		}
		out = y
	default:
		return checkFormat(format)
	}
	_, err := w.Write(out)
	return err
}
