package apiserver

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What a record names is found in a request by the API's field
// conventions, for every method alike, so a new method needs no audit
// code: a "key" (ObjectKey), the object's own "metadata" (ObjectMeta),
// top-level "namespace" and "name" fields, a "node_name" (Bootstrap.Join),
// or else the one field that holds an object (Create's and Update's
// object, a console's open, a credential's subject), looked into the same
// way. Only those strings are read: never another field's value.

// auditObjectDepth bounds the search into object fields: a request holds
// its object at the top level or one field down (ConsoleInput.open).
const auditObjectDepth = 2

// auditObject returns the namespace and name msg (a request) is about;
// "" for what it does not name.
func auditObject(msg any) (namespace, name string) {
	m, ok := msg.(proto.Message)
	if !ok || m == nil {
		return "", ""
	}
	return objectOf(m.ProtoReflect(), auditObjectDepth)
}

func objectOf(m protoreflect.Message, depth int) (string, string) {
	if !m.IsValid() {
		return "", ""
	}
	fields := m.Descriptor().Fields()
	if fd := fields.ByName("key"); fd != nil && singularMessage(fd) && fd.Message().FullName() == objectKeyName {
		// Keys name namespaced objects only; an empty namespace is the
		// default one (keyOf).
		k := m.Get(fd).Message()
		ns := stringField(k, "namespace")
		if ns == "" {
			ns = apiv1.DefaultNamespace
		}
		return ns, stringField(k, "name")
	}
	if fd := fields.ByName("metadata"); fd != nil && singularMessage(fd) && fd.Message().FullName() == objectMetaName {
		// An object's empty namespace is the default one for namespaced
		// kinds and none for the others: the answer tells (answer).
		md := m.Get(fd).Message()
		return stringField(md, "namespace"), stringField(md, "name")
	}
	if fd := fields.ByName("name"); fd != nil && fd.Kind() == protoreflect.StringKind {
		return stringField(m, "namespace"), m.Get(fd).String()
	}
	if fd := fields.ByName("node_name"); fd != nil && fd.Kind() == protoreflect.StringKind {
		return "", m.Get(fd).String()
	}
	if depth == 0 {
		return "", ""
	}
	var object protoreflect.FieldDescriptor
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !singularMessage(fd) || !namesObject(fd.Message()) {
			continue
		}
		if object != nil {
			// Two objects: which one the call is about is not the
			// request's shape to say.
			return "", ""
		}
		object = fd
	}
	if object == nil {
		return "", ""
	}
	return objectOf(m.Get(object).Message(), depth-1)
}

// namesObject reports whether messages of md name an object: they carry
// metadata or a key, or a name.
func namesObject(md protoreflect.MessageDescriptor) bool {
	f := md.Fields()
	for _, n := range []protoreflect.Name{"key", "metadata"} {
		if fd := f.ByName(n); fd != nil && singularMessage(fd) &&
			(fd.Message().FullName() == objectKeyName || fd.Message().FullName() == objectMetaName) {
			return true
		}
	}
	fd := f.ByName("name")
	return fd != nil && fd.Kind() == protoreflect.StringKind && fd.Cardinality() != protoreflect.Repeated
}

// auditAnswer returns the namespace, name and uid of the object msg (an
// answer) carries in its metadata, or in that of its one object field (an
// export or credential beside its token). The name fills a record whose
// request named none (a generated name).
func auditAnswer(msg any) (namespace, name, uid string) {
	m, ok := msg.(proto.Message)
	if !ok || m == nil {
		return "", "", ""
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return "", "", ""
	}
	if md, ok := metadataOf(r); ok {
		return stringField(md, "namespace"), stringField(md, "name"), stringField(md, "uid")
	}
	var found protoreflect.Message
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !singularMessage(fd) || !r.Has(fd) {
			continue
		}
		if md, ok := metadataOf(r.Get(fd).Message()); ok {
			if found != nil {
				return "", "", ""
			}
			found = md
		}
	}
	if found == nil {
		return "", "", ""
	}
	return stringField(found, "namespace"), stringField(found, "name"), stringField(found, "uid")
}

// metadataOf returns m's metadata when it has some.
func metadataOf(m protoreflect.Message) (protoreflect.Message, bool) {
	fd := m.Descriptor().Fields().ByName("metadata")
	if fd == nil || !singularMessage(fd) || fd.Message().FullName() != objectMetaName || !m.Has(fd) {
		return nil, false
	}
	return m.Get(fd).Message(), true
}

func singularMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind && fd.Cardinality() != protoreflect.Repeated
}

func stringField(m protoreflect.Message, name protoreflect.Name) string {
	fd := m.Descriptor().Fields().ByName(name)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.Cardinality() == protoreflect.Repeated {
		return ""
	}
	return m.Get(fd).String()
}
