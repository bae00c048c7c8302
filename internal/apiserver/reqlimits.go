package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// Request size limits, per method: what the largest legitimate request of
// the method can be, from the limits validation holds requests to.
//
// grpc-go (v1.85) reads a request message whole before any handler or
// interceptor sees it (server.go processRPC → serverStream.RecvMsg →
// rpc_util.go recv). The one check it makes before reading the body is
// MaxRecvMsgSize against the message's 5-byte length prefix
// (parser.recvMsg), and that is one size for the whole server. So:
//   - MaxRecvMsgSize defaults to the largest limit here, storedRequest:
//     a message larger than any method takes is refused from its prefix,
//     before a byte of its body is read;
//   - limitCodec, the server's codec, refuses a message over its
//     method's limit (ResourceExhausted) after grpc read it and before
//     it is decoded: that
//     saves the decode (a second copy and the decoded fields) and all a
//     handler would do with it, not the read;
//   - what an identity can make the server read at once is bounded by
//     the calls it may have in flight (limits.go, startRequest): every
//     call's read costs up to MaxRecvMsgSize, whatever its method.
const (
	// smallRequest is the limit of every method requestLimits does not
	// name: keys, list and watch options (a label selector is at most 8
	// KiB), lifecycle verbs, a join's CSR, a node's pull status (a
	// message of at most validation.MaxStatusMessageLen, 32 KiB), console
	// data (the CLI sends 4 KiB, node agents 32 KiB at most).
	smallRequest = 64 << 10
	// metaRequest: an object whose spec is a few names, bounded by its
	// metadata: annotations of at most validation.MaxAnnotationBytes, and
	// validation.MaxLabels labels (of at most 379 bytes each, 24 KiB) and
	// as many node selector terms (a migration's).
	metaRequest = validation.MaxAnnotationBytes + 128<<10
	// nodeRequest: a node's registration or heartbeat, which carry its
	// image list (at most validation.MaxNodeImageListBytes), its bridges
	// and libvirt networks (under 100 KiB, nodenetworks.go), its labels
	// and figures.
	nodeRequest = validation.MaxNodeImageListBytes + 256<<10
	// objectRequest: a user's object that validation bounds as a whole,
	// at validation.MaxObjectBytes (a VM, a replica set's or pool's
	// template, a snapshot, restore or clone), and the request around it.
	objectRequest = validation.MaxObjectBytes + 64<<10
	// storedRequest: a stored object sent back with a new status (node
	// agents send the whole instance, snapshot content or restore they
	// read). No stored object is larger than etcd's largest write.
	storedRequest = etcdserver.MaxRequestBytes + 16<<10
)

// requestLimits are the methods that take more than smallRequest. A
// method that needs more must be named here: TestRequestLimits checks
// that the largest legitimate requests fit.
var requestLimits = map[string]int{
	apiv1.VirtualMachines_Create_FullMethodName: objectRequest,
	apiv1.VirtualMachines_Update_FullMethodName: objectRequest,
	apiv1.ReplicaSets_Create_FullMethodName:     objectRequest,
	apiv1.ReplicaSets_Update_FullMethodName:     objectRequest,
	apiv1.Pools_Create_FullMethodName:           objectRequest,
	apiv1.Pools_Update_FullMethodName:           objectRequest,
	apiv1.Snapshots_Create_FullMethodName:       objectRequest,
	apiv1.Restores_Create_FullMethodName:        objectRequest,
	apiv1.Clones_Create_FullMethodName:          objectRequest,

	apiv1.Images_Create_FullMethodName: metaRequest,
	apiv1.Images_Update_FullMethodName: metaRequest,
	// A class is its metadata, a node selector and a few short strings.
	apiv1.StorageClasses_Create_FullMethodName: metaRequest,
	apiv1.StorageClasses_Update_FullMethodName: metaRequest,
	apiv1.Migrations_Create_FullMethodName:     metaRequest,
	// An adoption names a node and a domain.
	apiv1.Adoptions_Create_FullMethodName: metaRequest,

	apiv1.Nodes_Register_FullMethodName:  nodeRequest,
	apiv1.Nodes_Heartbeat_FullMethodName: nodeRequest,

	apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName: storedRequest,
	apiv1.SnapshotContents_UpdateStatus_FullMethodName:        storedRequest,
	apiv1.Restores_UpdateStatus_FullMethodName:                storedRequest,
	apiv1.Snapshots_UpdateStatus_FullMethodName:               storedRequest,
	apiv1.Clones_UpdateStatus_FullMethodName:                  storedRequest,

	// A chunk of an image upload and its few names.
	apiv1.ImageUploads_Write_FullMethodName: UploadChunkSize + 4<<10,
	// The node's report carries the VM template the domain maps to.
	apiv1.Adoptions_UpdateStatus_FullMethodName: storedRequest,
}

// requestLimit is the largest request message method takes.
func requestLimit(method string) int {
	if n, ok := requestLimits[method]; ok {
		return n
	}
	return smallRequest
}

// largeRequest reports whether method takes requests over smallRequest:
// its calls count against the smaller in-flight cap too.
func largeRequest(method string) bool { return requestLimit(method) > smallRequest }

// typeLimit is the limit of the methods that take one request type.
type typeLimit struct {
	bytes int
	// method names them for messages and the refusal metric:
	// "/virtplane.v1.Nodes/Cordon|Drain|Uncordon" when several share it.
	method string
}

// typeLimits are requestLimits by request message type, which is all a
// codec sees. Methods that share a type share a limit
// (TestRequestLimits).
var typeLimits = func() map[protoreflect.FullName]typeLimit {
	svcs, names := map[protoreflect.FullName][]string{}, map[protoreflect.FullName][]string{}
	out := map[protoreflect.FullName]typeLimit{}
	for _, sd := range apiv1.Services() {
		ms := sd.Methods()
		for i := range ms.Len() {
			m := ms.Get(i)
			in := m.Input().FullName()
			svcs[in] = appendNew(svcs[in], string(sd.Name()))
			names[in] = appendNew(names[in], string(m.Name()))
			out[in] = typeLimit{bytes: max(out[in].bytes, requestLimit("/"+string(sd.FullName())+"/"+string(m.Name())))}
		}
	}
	for in, l := range out {
		l.method = "/" + string(apiv1.File_internal_api_v1_service_proto.Package()) + "." +
			strings.Join(svcs[in], "|") + "/" + strings.Join(names[in], "|")
		out[in] = l
	}
	return out
}()

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	s = append(s, v)
	slices.Sort(s)
	return s
}

// limitCodec is the server's codec: grpc's proto codec, which leaves a
// request message over its method's limit undecoded. grpc reports any
// codec error as Internal ("grpc: failed to unmarshal the received
// message"), which would tell the caller the server failed; so the codec
// decodes nothing and notes the message in oversize instead, and the
// first interceptor refuses the call as ResourceExhausted (what grpc
// itself answers for a message over MaxRecvMsgSize).
type limitCodec struct {
	encoding.CodecV2
	refused  func(method, reason string)
	oversize *oversized
}

func newLimitCodec(refused func(method, reason string), o *oversized) limitCodec {
	return limitCodec{CodecV2: encoding.GetCodecV2(grpcproto.Name), refused: refused, oversize: o}
}

func (c limitCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var l typeLimit
	if m, ok := v.(proto.Message); ok {
		l = typeLimits[m.ProtoReflect().Descriptor().FullName()]
	}
	if l.bytes == 0 {
		// No method takes it: the smallest limit.
		l = typeLimit{bytes: smallRequest, method: fmt.Sprintf("%T", v)}
	}
	if n := data.Len(); n > l.bytes {
		c.refused(l.method, "size")
		c.oversize.m.Store(v, fmt.Sprintf("%s takes requests of at most %d bytes, this one has %d", strings.TrimPrefix(l.method, "/"), l.bytes, n))
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// oversized holds the request messages limitCodec left undecoded, by
// their address, from the decode to the interceptor that refuses their
// call (the next thing grpc runs with them: a unary handler decodes its
// request and calls the interceptors at once; a stream's RecvMsg returns
// through refuseOversizeStream's wrapper).
type oversized struct{ m sync.Map }

// refusal is the refusal of a call whose request message msg was too
// large, nil for any other message.
func (o *oversized) refusal(msg any) error {
	if why, ok := o.m.LoadAndDelete(msg); ok {
		return status.Error(codes.ResourceExhausted, why.(string))
	}
	return nil
}

func (o *oversized) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := o.refusal(req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (o *oversized) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, oversizedStream{ServerStream: ss, o: o})
}

type oversizedStream struct {
	grpc.ServerStream
	o *oversized
}

func (s oversizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.o.refusal(m)
}
