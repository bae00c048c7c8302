package command

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

const apiVersion = "virtplane.io/v1"

// document is one part of a manifest between "---" lines.
type document struct {
	data []byte
	line int // 1-based line of the file the document starts on
}

// splitDocuments cuts a YAML stream at "---" lines. A JSON file is one
// document.
func splitDocuments(data []byte) []document {
	var (
		docs  []document
		cur   bytes.Buffer
		start = 1
		line  = 0
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	for sc.Scan() {
		line++
		text := sc.Text()
		if t := strings.TrimRight(text, " \t\r"); t == "---" || strings.HasPrefix(t, "--- ") {
			docs = append(docs, document{data: bytes.Clone(cur.Bytes()), line: start})
			cur.Reset()
			start = line + 1
			continue
		}
		cur.WriteString(text)
		cur.WriteByte('\n')
	}
	return append(docs, document{data: cur.Bytes(), line: start})
}

// manifestKinds are the kinds apply takes (those with a create call), by
// the manifest's kind, and manifestKindList names them for messages in
// the order of kinds.
var manifestKinds, manifestKindList = func() (map[string]*resource, string) {
	m := map[string]*resource{}
	var names []string
	for _, r := range kinds {
		if r.calls.create != nil {
			m[r.Kind] = r
			names = append(names, r.Kind)
		}
	}
	return m, orList(names)
}()

// parseManifests reads the objects in data (a kind of manifestKinds each);
// source names the file in errors. namespace fills in empty
// metadata.namespace; when namespaceExplicit (-n given) a different
// namespace in a document is refused, as kubectl does, rather than
// silently picking one.
func parseManifests(source string, data []byte, namespace string, namespaceExplicit bool) ([]object, error) {
	var objs []object
	index := 0
	for _, doc := range splitDocuments(data) {
		j, err := yaml.YAMLToJSONStrict(doc.data)
		if err != nil {
			return nil, fmt.Errorf("%s: document starting at line %d: %w", source, doc.line, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue // empty or comments only
		}
		index++
		obj, err := parseDocument(j, namespace, namespaceExplicit)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d%s: %w", source, index, docLabel(j), err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no objects found", source)
	}
	return objs, nil
}

// docLabel names the object of a document for errors, when it can.
func docLabel(j []byte) string {
	var d struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(j, &d) != nil || d.Kind == "" || d.Metadata.Name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s %q)", d.Kind, d.Metadata.Name)
}

func parseDocument(j []byte, namespace string, namespaceExplicit bool) (object, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(j, &fields); err != nil {
		return nil, fmt.Errorf("want an object with kind: %s, got %s", manifestKindList, jsonType(j))
	}
	var kind, version string
	if err := stringField(fields, "kind", &kind); err != nil {
		return nil, err
	}
	if err := stringField(fields, "apiVersion", &version); err != nil {
		return nil, err
	}
	res, ok := manifestKinds[kind]
	switch {
	case kind == "":
		return nil, fmt.Errorf("kind is missing (want kind: %s)", manifestKindList)
	case !ok:
		return nil, fmt.Errorf("kind %q cannot be applied: only %s are supported", kind, strings.Replace(manifestKindList, " or ", " and ", 1))
	}
	if version != "" && version != apiVersion {
		return nil, fmt.Errorf("apiVersion %q is not supported (want %s or none)", version, apiVersion)
	}
	delete(fields, "kind")
	delete(fields, "apiVersion")
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}

	obj := res.calls.newObject()
	// DiscardUnknown false: a misspelt field must fail, not vanish.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, obj); err != nil {
		return nil, protojsonError(err, obj.ProtoReflect().Descriptor(), body)
	}

	md := obj.GetMetadata()
	if md.GetName() == "" {
		return nil, fmt.Errorf("metadata.name is required")
	}
	switch ns := md.GetNamespace(); {
	case !res.Namespaced && ns != "":
		return nil, fmt.Errorf("metadata.namespace: a %s is cluster-scoped and has no namespace (got %q)", res.Kind, ns)
	case !res.Namespaced:
		// -n does not apply to a cluster-scoped kind.
	case ns == "":
		md.Namespace = namespace
	case namespaceExplicit && ns != namespace:
		return nil, fmt.Errorf("the namespace of the object (%q) does not match --namespace %q", ns, namespace)
	}
	return obj, nil
}

func stringField(fields map[string]json.RawMessage, name string, dst *string) error {
	raw, ok := fields[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%s must be a string, got %s", name, jsonType(raw))
	}
	return nil
}

func jsonType(j []byte) string {
	var v any
	if json.Unmarshal(j, &v) != nil {
		return "invalid JSON"
	}
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

var (
	// protojson positions refer to the JSON converted from YAML, which the
	// user never saw, so they are dropped. protojson separates its parts
	// with a space or a U+00A0, chosen at random.
	protojsonPosition = regexp.MustCompile(`^(proto:[\s\x{00a0}]*)?(\(line \d+:\d+\):[\s\x{00a0}]*)?`)
	unknownField      = regexp.MustCompile(`unknown field "([^"]+)"`)
)

// protojsonError keeps protojson's message and, for an unknown field, adds
// where in the object it is.
func protojsonError(err error, md protoreflect.MessageDescriptor, body []byte) error {
	msg := protojsonPosition.ReplaceAllString(err.Error(), "")
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		var v any
		if json.Unmarshal(body, &v) == nil {
			if path := findUnknownField(md, v, "", m[1]); path != "" {
				msg += " at " + path
			}
		}
	}
	return fmt.Errorf("%s", msg)
}

// findUnknownField returns the path of a key called name that md does not
// define, searching v (decoded JSON for a message of type md) depth first.
func findUnknownField(md protoreflect.MessageDescriptor, v any, prefix, name string) string {
	obj, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		if fd == nil {
			if k == name {
				return path
			}
			continue
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			continue
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				continue
			}
			if m, ok := obj[k].(map[string]any); ok {
				for mk, mv := range m {
					if p := findUnknownField(fd.MapValue().Message(), mv, fmt.Sprintf("%s[%s]", path, mk), name); p != "" {
						return p
					}
				}
			}
		case fd.IsList():
			if l, ok := obj[k].([]any); ok {
				for i, e := range l {
					if p := findUnknownField(fd.Message(), e, fmt.Sprintf("%s[%d]", path, i), name); p != "" {
						return p
					}
				}
			}
		default:
			if p := findUnknownField(fd.Message(), obj[k], path, name); p != "" {
				return p
			}
		}
	}
	return ""
}
