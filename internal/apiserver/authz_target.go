package apiserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// target is where a request acts, as a namespaced rule sees it.
type target struct {
	// ns is the namespace; all, every namespace (a List or Watch with
	// namespace "").
	ns  string
	all bool
	// clusterAdmin: only cluster-admins may make this request, because
	// of why (an image without an owner, a user's credential).
	clusterAdmin bool
	why          string
}

// targetFunc finds a request's target. It runs only for callers below
// cluster-admin, after the request is decoded.
type targetFunc func(ctx context.Context, s *Server, req any) (target, error)

var (
	objectKeyName    = (&apiv1.ObjectKey{}).ProtoReflect().Descriptor().FullName()
	listOptionsName  = (&apiv1.ListOptions{}).ProtoReflect().Descriptor().FullName()
	watchOptionsName = (&apiv1.WatchOptions{}).ProtoReflect().Descriptor().FullName()
	objectMetaName   = (&apiv1.ObjectMeta{}).ProtoReflect().Descriptor().FullName()
	consoleOpenName  = (&apiv1.ConsoleOpen{}).ProtoReflect().Descriptor().FullName()
)

// errNoNamespace: a namespaced rule for a request that names none; the
// table test calls every rule, so this is a bug of the table.
var errNoNamespace = errors.New("the request names no namespace")

// requestTarget is the namespace of a namespaced kind's request, read as
// the handlers read it: a key's namespace (""
// is the default namespace, as keyOf has it), a list's or watch's
// options' ("" is all namespaces), the namespace of the object a write
// carries (its metadata; "" is the default namespace, as defaulting
// has it), a console's open message's.
func requestTarget(_ context.Context, _ *Server, req any) (target, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return target{}, status.Errorf(codes.Internal, "authorization: %T is no message", req)
	}
	t, err := namespaceOf(m.ProtoReflect())
	if err != nil {
		return target{}, status.Errorf(codes.Internal, "authorization: %s: %v", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return t, nil
}

func namespaceOf(msg protoreflect.Message) (target, error) {
	fields := msg.Descriptor().Fields()
	orDefault := func(ns string) target {
		if ns == "" {
			ns = apiv1.DefaultNamespace
		}
		return target{ns: ns}
	}
	// Keys, options and the console's open message first: a request
	// with a key may carry options too (DeleteOptions are no namespace).
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Message() == nil || f.IsList() || f.IsMap() {
			continue
		}
		sub := msg.Get(f).Message()
		switch f.Message().FullName() {
		case objectKeyName, consoleOpenName:
			return orDefault(sub.Get(sub.Descriptor().Fields().ByName("namespace")).String()), nil
		case listOptionsName, watchOptionsName:
			ns := sub.Get(sub.Descriptor().Fields().ByName("namespace")).String()
			return target{ns: ns, all: ns == ""}, nil
		}
	}
	// A write carries its object: its metadata's namespace.
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Message() == nil || f.IsList() || f.IsMap() {
			continue
		}
		md := f.Message().Fields().ByName("metadata")
		if md == nil || md.Message() == nil || md.Message().FullName() != objectMetaName {
			continue
		}
		meta := msg.Get(f).Message().Get(md).Message()
		return orDefault(meta.Get(meta.Descriptor().Fields().ByName("namespace")).String()), nil
	}
	return target{}, errNoNamespace
}

// ownerOf is the namespace that owns an image (its label
// virtplane.io/namespace), "" for a cluster-admin's.
func ownerOf(img *apiv1.Image) string {
	return img.GetMetadata().GetLabels()[apiv1.LabelOwnerNamespace]
}

// imageOwned is the target of a write of an image owned by ns.
func imageOwned(ns, name string) target {
	if ns == "" {
		return target{clusterAdmin: true, why: fmt.Sprintf("image %q has no label %s: it is the cluster-admins'", name, apiv1.LabelOwnerNamespace)}
	}
	return target{ns: ns}
}

// imageCreateOwner: a new image belongs to the namespace its request's
// label names; non-cluster-admins must name one.
func imageCreateOwner(_ context.Context, _ *Server, req any) (target, error) {
	img := req.(*apiv1.CreateImageRequest).GetImage()
	if ns := ownerOf(img); ns != "" {
		return target{ns: ns}, nil
	}
	return target{clusterAdmin: true, why: fmt.Sprintf("an image without the label %s (set it to your namespace)", apiv1.LabelOwnerNamespace)}, nil
}

// storedImageOwner: a write of an existing image (Delete, uploads)
// belongs to the namespace the stored image's label names. An image that
// does not exist has no owner: making one by upload is the
// cluster-admins'.
func storedImageOwner(ctx context.Context, s *Server, req any) (target, error) {
	name := req.(interface{ GetName() string }).GetName()
	img, err := storedImage(ctx, s, name)
	if err != nil || img == nil {
		return target{clusterAdmin: true, why: fmt.Sprintf("image %q does not exist: new images without the label %s are the cluster-admins'", name, apiv1.LabelOwnerNamespace)}, err
	}
	return imageOwned(ownerOf(img), name), nil
}

// imageUpdateOwner: an update belongs to the stored image's namespace,
// and may not move the image to another.
func imageUpdateOwner(ctx context.Context, s *Server, req any) (target, error) {
	in := req.(*apiv1.UpdateImageRequest).GetImage()
	name := in.GetMetadata().GetName()
	img, err := storedImage(ctx, s, name)
	if err != nil || img == nil {
		return target{clusterAdmin: true, why: fmt.Sprintf("image %q does not exist", name)}, err
	}
	if ownerOf(in) != ownerOf(img) {
		return target{clusterAdmin: true, why: fmt.Sprintf("changing the label %s of image %q", apiv1.LabelOwnerNamespace, name)}, nil
	}
	return imageOwned(ownerOf(img), name), nil
}

// storedImage is the image name, nil when there is none.
func storedImage(ctx context.Context, s *Server, name string) (*apiv1.Image, error) {
	if s.stores.Images == nil || name == "" {
		return nil, nil
	}
	img, err := s.stores.Images.Get(ctx, "", name)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return nil, nil
	case err != nil:
		return nil, toStatus(err)
	}
	return img, nil
}

// subjectTarget: a user's credentials are the cluster-admins'; a service
// account's also its namespace's admins'.
func subjectTarget(s *apiv1.Subject, what string) target {
	if s.GetKind() == apiv1.SubjectServiceAccount && s.GetNamespace() != "" {
		return target{ns: s.GetNamespace()}
	}
	return target{clusterAdmin: true, why: what}
}

// requestSubject is the target of a request naming a subject (issuing,
// listing credentials); a list of every subject's is the cluster-admins'.
func requestSubject(_ context.Context, _ *Server, req any) (target, error) {
	s := req.(interface{ GetSubject() *apiv1.Subject }).GetSubject()
	if s == nil {
		return target{clusterAdmin: true, why: "every subject's credentials (set subject to a service account of your namespace)"}, nil
	}
	return subjectTarget(s, fmt.Sprintf("the credentials of %s", subjectKey(s))), nil
}

// storedCredentialSubject is the target of a request naming a stored
// credential: its subject's. One that does not exist is the
// cluster-admins' to be told about.
func storedCredentialSubject(ctx context.Context, s *Server, req any) (target, error) {
	name := req.(interface{ GetName() string }).GetName()
	notFound := target{clusterAdmin: true, why: fmt.Sprintf("credential %q, which is not a service account's", name)}
	if s.stores.Credentials == nil || name == "" {
		return notFound, nil
	}
	cr, err := s.stores.Credentials.Get(ctx, "", name)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return notFound, nil
	case err != nil:
		return target{}, toStatus(err)
	}
	sub := cr.GetSpec().GetSubject()
	return subjectTarget(sub, fmt.Sprintf("the credentials of %s", subjectKey(sub))), nil
}

// namespaceByName: a namespace's own object is in itself.
func namespaceByName(_ context.Context, _ *Server, req any) (target, error) {
	return target{ns: req.(*apiv1.GetNamespaceRequest).GetName()}, nil
}

// namespacesHeld keeps the namespaces a caller has a role in.
func namespacesHeld(g grants, resp any) any {
	l := resp.(*apiv1.ListNamespacesResponse)
	if g.cluster >= roleView {
		return l
	}
	out := proto.Clone(l).(*apiv1.ListNamespacesResponse)
	out.Items = out.Items[:0]
	for _, n := range l.GetItems() {
		if g.in(n.GetMetadata().GetName()) >= roleView {
			out.Items = append(out.Items, n)
		}
	}
	return out
}
