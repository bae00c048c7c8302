package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/wait"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Options configure an etcd-backed store.
type Options struct {
	// Prefix of every key; DefaultPrefix when empty.
	Prefix string
	// Clock stamps creation and deletion timestamps; time.Now when nil.
	Clock func() time.Time
	// LeaderTerm, when set, makes every write conditional on that leader
	// term (see the package documentation).
	LeaderTerm *LeaderTerm
	// Accounting keeps namespaces' usage in the transaction of every write
	// of a kind quotas count and refuses writes beyond a quota
	// (*QuotaExceededError); creates of namespaced objects make their
	// Namespace when it has none (accounting.go). Every store of a server
	// and its controllers has it on.
	Accounting bool
}

// LeaderTerm is one won leader election (internal/leader): the key the
// winner created under the election prefix and that key's create
// revision. The key keeps that revision until the term ends (resigned, or
// its lease expired); a later term is another key or a new revision.
type LeaderTerm struct {
	Key      string
	Revision int64
}

// MaxConflictRetries bounds GuaranteedUpdate and Delete under contention,
// in every backend.
// Every retry means another writer succeeded, so only pathological
// contention gets this far.
const MaxConflictRetries = 1000

type etcdStore[T Object] struct {
	client  *clientv3.Client
	res     Resource[T]
	keys    keys
	clock   func() time.Time
	term    *LeaderTerm
	metrics storeMetrics
	hub     *hub[T]
	acct    *accounting // nil: no accounting
}

// New returns the store of res in etcd.
func New[T Object](client *clientv3.Client, res Resource[T], opts Options) Store[T] {
	clock := opts.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &etcdStore[T]{
		client:  client,
		res:     res,
		keys:    newKeys(opts.Prefix, res.Plural, res.Kind, res.Namespaced),
		clock:   clock,
		term:    opts.LeaderTerm,
		metrics: newStoreMetrics(res.Kind),
	}
	if opts.Accounting {
		s.acct = &accounting{
			nsKeys:     newKeys(opts.Prefix, Namespaces.Plural, Namespaces.Kind, false),
			clock:      clock,
			charged:    charged(res),
			namespaced: res.Namespaced,
		}
		if res.Plural == Namespaces.Plural {
			for _, p := range namespacedPlurals {
				s.acct.emptyRoots = append(s.acct.emptyRoots, newKeys(opts.Prefix, p, "", true).root)
			}
		}
	}
	s.hub = newHub(s)
	return s
}

func (s *etcdStore[T]) Create(ctx context.Context, obj T) (T, error) {
	defer s.metrics.observe(opCreate, time.Now())
	var zero T
	md := obj.GetMetadata()
	if md == nil {
		return zero, fmt.Errorf("%s: %w: metadata is required", s.keys.kind, ErrInvalid)
	}
	key, err := s.keys.key(md.Namespace, md.Name)
	if err != nil {
		return zero, err
	}
	ref := apiv1.Ref(md.Namespace, md.Name)

	obj = clone(obj)
	md = obj.GetMetadata()
	md.Uid = uuid.NewString()
	md.CreationTimestamp = timestamppb.New(s.clock())
	if md.Generation == 0 {
		md.Generation = 1
	}
	data, err := encode(obj)
	if err != nil {
		return zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, err)
	}
	resp, err := s.commitCharged(ctx, s.acct.plan(nil, obj, true), []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{clientv3.OpPut(key, string(data))})
	if err != nil {
		return zero, fmt.Errorf("%s %q: create: %w", s.keys.kind, ref, err)
	}
	if !resp.Succeeded {
		return zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, ErrAlreadyExists)
	}
	s.metrics.wrote(opCreate)
	md.ResourceVersion = resp.Header.Revision
	return obj, nil
}

func (s *etcdStore[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	defer s.metrics.observe(opGet, time.Now())
	return s.get(ctx, namespace, name)
}

func (s *etcdStore[T]) get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	key, err := s.keys.key(namespace, name)
	if err != nil {
		return zero, err
	}
	ref := apiv1.Ref(namespace, name)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return zero, fmt.Errorf("%s %q: get: %w", s.keys.kind, ref, err)
	}
	if len(resp.Kvs) == 0 {
		return zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, ErrNotFound)
	}
	return s.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

func (s *etcdStore[T]) List(ctx context.Context, opts ListOptions) ([]T, int64, error) {
	defer s.metrics.observe(opList, time.Now())
	f, err := s.newFilter(opts.Namespace, "", opts.LabelSelector)
	if err != nil {
		return nil, 0, err
	}
	return s.list(ctx, f)
}

// list reads everything f watches, at the current revision.
func (s *etcdStore[T]) list(ctx context.Context, f filter) ([]T, int64, error) {
	var ops []clientv3.OpOption
	if f.isPrefix {
		ops = append(ops, clientv3.WithPrefix())
	}
	resp, err := s.client.Get(ctx, f.key, ops...)
	if err != nil {
		return nil, 0, fmt.Errorf("%ss: list: %w", s.keys.kind, err)
	}
	out := make([]T, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		obj, err := s.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, 0, err
		}
		if f.Matches(obj) {
			out = append(out, obj)
		}
	}
	SortByRef(out)
	return out, resp.Header.Revision, nil
}

func (s *etcdStore[T]) Update(ctx context.Context, obj T) (T, error) {
	defer s.metrics.observe(opUpdate, time.Now())
	var unknown T
	out, _, err := s.update(ctx, obj, unknown)
	return out, err
}

// update writes obj if the stored object is still at obj's resource
// version. On ErrConflict it also returns the stored object read in the
// same transaction, so callers can retry without another read. old is the
// stored object obj replaces when the caller has it (nil otherwise), which
// accounting needs.
func (s *etcdStore[T]) update(ctx context.Context, obj, old T) (out, current T, err error) {
	var zero T
	md := obj.GetMetadata()
	if md == nil {
		return zero, zero, fmt.Errorf("%s: %w: metadata is required", s.keys.kind, ErrInvalid)
	}
	key, err := s.keys.key(md.Namespace, md.Name)
	if err != nil {
		return zero, zero, err
	}
	ref := apiv1.Ref(md.Namespace, md.Name)
	rv := md.ResourceVersion
	if rv <= 0 {
		return zero, zero, fmt.Errorf("%s %q: %w: resource version is required", s.keys.kind, ref, ErrInvalid)
	}

	if s.acct != nil && s.acct.charged && old.GetMetadata().GetResourceVersion() != rv {
		if old, err = s.storedAt(ctx, key, ref, rv); err != nil {
			return zero, old, err
		}
	}
	if md.DeletionTimestamp != nil && len(md.Finalizers) == 0 {
		return s.deleteAt(ctx, key, ref, obj, old, rv)
	}

	out = clone(obj)
	data, err := encode(out)
	if err != nil {
		return zero, zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, err)
	}
	var stored Object
	if old.GetMetadata() != nil {
		stored = old
	}
	rev, current, err := s.writeAt(ctx, key, ref, rv, clientv3.OpPut(key, string(data)), opUpdate, s.acct.plan(stored, out, false), nil)
	if err != nil {
		return zero, current, err
	}
	out.GetMetadata().ResourceVersion = rev
	return out, zero, nil
}

// writeAt commits op, the write counted as what (opUpdate, opDelete), if
// key is still at revision rv, and returns the revision it committed at.
// When key has moved on, the error is ErrConflict and current the object
// stored now. ch is what the write changes in namespaces' usage.
// guards are further compares the write needs (deleteGuards).
func (s *etcdStore[T]) writeAt(ctx context.Context, key, ref string, rv int64, op clientv3.Op, what string, ch charges, guards []clientv3.Cmp) (rev int64, current T, err error) {
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rv)}, guards...)
	resp, err := s.commitCharged(ctx, ch, cmps, []clientv3.Op{op}, clientv3.OpGet(key))
	if err != nil {
		return 0, current, fmt.Errorf("%s %q: %s: %w", s.keys.kind, ref, what, err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(guards) > 0 && len(kvs) > 0 && kvs[0].ModRevision == rv {
			return 0, current, fmt.Errorf("%s %q: %s: %w: objects are stored in it", s.keys.kind, ref, what, ErrNotEmpty)
		}
		current, err := s.failedCAS(resp, ref, rv)
		return 0, current, err
	}
	s.metrics.wrote(what)
	return resp.Header.Revision, current, nil
}

// droppedBackoff spaces the attempts at a write that was never applied:
// 1.55 s of waits in all, past a leadership transfer's election timeout
// (1 s).
var droppedBackoff = wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 6}

// commitTxn commits, again while the write was refused before it reached
// raft's log: raft dropped the proposal, or the member knew no leader
// (the caller asked for one with clientv3.WithRequireLeader, so the
// member refused the request before proposing it). Both happen for a
// moment whenever raft leadership moves, which the controllers' leader
// does on purpose when it takes over; without a majority the last
// refusal is returned and says so.
func commitTxn(ctx context.Context, txn func() (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	var (
		resp *clientv3.TxnResponse
		err  error
	)
	werr := wait.ExponentialBackoffWithContext(ctx, droppedBackoff, func(context.Context) (bool, error) {
		resp, err = txn()
		return !IsProposalDropped(err) && !isNoLeader(err), nil
	})
	if err == nil && werr != nil {
		err = werr
	}
	return resp, err
}

// isNoLeader reports a member's refusal of a request that required a
// leader when it knew none.
func isNoLeader(err error) bool {
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrGRPCNoLeader)
}

// IsProposalDropped reports etcd's "raft proposal dropped": raft refused
// to append the write, e.g. while leadership moved to another member (the
// controllers' leader hands it on: etcdserver.KeepRaftLeadershipAway), so
// the write was never applied and may be sent again. etcd has no code for
// it: it arrives as Unknown with raft's message.
func IsProposalDropped(err error) bool {
	// The status itself, not status.FromError's, whose message is the
	// whole wrapped error's.
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return false
	}
	st := se.GRPCStatus()
	return st.Code() == codes.Unknown && st.Message() == raft.ErrProposalDropped.Error()
}

// commit runs the write transaction "if cmp then op else els", fenced to
// the store's leader term if it has one. A transaction that failed only
// because the term ended is ErrNotLeader; otherwise the caller reads why
// cmp failed from the Else responses, which come first.
func (s *etcdStore[T]) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	f := s.term
	if f == nil {
		return commitTxn(ctx, func() (*clientv3.TxnResponse, error) {
			return s.client.Txn(ctx).If(cmps...).Then(ops...).Else(els...).Commit()
		})
	}
	resp, err := commitTxn(ctx, func() (*clientv3.TxnResponse, error) {
		return s.client.Txn(ctx).
			If(append(slices.Clone(cmps), clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Revision))...).
			Then(ops...).
			Else(append(els, clientv3.OpGet(f.Key))...).
			Commit()
	})
	if err != nil || resp.Succeeded {
		return resp, err
	}
	if kvs := resp.Responses[len(els)].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].CreateRevision != f.Revision {
		return nil, fmt.Errorf("%w: the leader term of %s at revision %d has ended", ErrNotLeader, f.Key, f.Revision)
	}
	return resp, nil
}

// deleteAt deletes key if it is still at revision rv, and returns last
// with the deletion revision as its resource version, as a watch would.
// stored is the object at rv, whose usage the deletion releases (nil when
// the store does no accounting of its kind).
func (s *etcdStore[T]) deleteAt(ctx context.Context, key, ref string, last, stored T, rv int64) (out, current T, err error) {
	var zero T
	var old Object
	if stored.GetMetadata() != nil {
		old = stored
	}
	rev, current, err := s.writeAt(ctx, key, ref, rv, clientv3.OpDelete(key), opDelete, s.acct.plan(old, nil, false), s.acct.deleteGuards(last.GetMetadata().GetName()))
	if err != nil {
		return zero, current, err
	}
	out = clone(last)
	out.GetMetadata().ResourceVersion = rev
	return out, zero, nil
}

// failedCAS tells "gone" from "changed" using the Else read of a
// compare-and-swap txn, and returns the current object in the latter case.
func (s *etcdStore[T]) failedCAS(resp *clientv3.TxnResponse, ref string, rv int64) (T, error) {
	var zero T
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, ErrNotFound)
	}
	current, err := s.decode(kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return zero, err
	}
	return current, fmt.Errorf("%s %q: %w: resource version %d, stored %d",
		s.keys.kind, ref, ErrConflict, rv, kvs[0].ModRevision)
}

func (s *etcdStore[T]) GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(T) (T, error)) (T, error) {
	defer s.metrics.observe(opGuaranteedUpdate, time.Now())
	var zero T
	cur, err := s.get(ctx, namespace, name)
	if err != nil {
		return zero, err
	}
	// The write replaces what fn was given, which accounting needs.
	var seen T
	return UpdateLoop(ctx, cur, namespace, name, func(in T) (T, error) {
		seen = clone(in)
		return fn(in)
	},
		func(obj T) (T, T, error) { return s.update(ctx, obj, seen) },
		func(err error) error { return fmt.Errorf("%s %q: %w", s.keys.kind, apiv1.Ref(namespace, name), err) })
}

func (s *etcdStore[T]) Delete(ctx context.Context, namespace, name string, opts DeleteOptions) (T, bool, error) {
	defer s.metrics.observe(opDelete, time.Now())
	var zero T
	key, err := s.keys.key(namespace, name)
	if err != nil {
		return zero, false, err
	}
	ref := apiv1.Ref(namespace, name)
	cur, err := s.get(ctx, namespace, name)
	if err != nil {
		return zero, false, err
	}
	for attempt := 1; ; attempt++ {
		md := cur.GetMetadata()
		if opts.UID != "" && opts.UID != md.Uid {
			return zero, false, fmt.Errorf("%s %q: %w: uid is %s, precondition %s",
				s.keys.kind, ref, ErrConflict, md.Uid, opts.UID)
		}
		if opts.ResourceVersion != 0 && opts.ResourceVersion != md.ResourceVersion {
			return zero, false, fmt.Errorf("%s %q: %w: resource version is %d, precondition %d",
				s.keys.kind, ref, ErrConflict, md.ResourceVersion, opts.ResourceVersion)
		}

		var res, latest T
		deleted := len(md.Finalizers) == 0
		if deleted {
			res, latest, err = s.deleteAt(ctx, key, ref, cur, cur, md.ResourceVersion)
		} else {
			if md.DeletionTimestamp != nil {
				return cur, false, nil // deletion already requested
			}
			next := clone(cur)
			next.GetMetadata().DeletionTimestamp = timestamppb.New(s.clock())
			res, latest, err = s.update(ctx, next, cur)
		}
		if !errors.Is(err, ErrConflict) {
			if err != nil {
				return zero, false, err
			}
			return res, deleted, nil
		}
		if attempt >= MaxConflictRetries {
			return zero, false, fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		if ctx.Err() != nil {
			return zero, false, fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		cur = latest
	}
}

// encode marshals obj without its resource version, which is the key's
// ModRevision and so can't be known before the write. It clears the field
// on obj.
func encode(obj Object) ([]byte, error) {
	obj.GetMetadata().ResourceVersion = 0
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return data, nil
}

// decodeInto unmarshals a stored object of another resource (the
// namespaces accounting charges).
func decodeInto(data []byte, obj Object) error {
	if err := proto.Unmarshal(data, obj); err != nil {
		return fmt.Errorf("decode stored object: %w", err)
	}
	return nil
}

func (s *etcdStore[T]) decode(data []byte, rev int64) (T, error) {
	obj := s.res.New()
	if err := proto.Unmarshal(data, obj); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: decode stored object: %w", s.keys.kind, err)
	}
	setMetadata(obj, obj.GetMetadata()).ResourceVersion = rev
	return obj, nil
}

// newStub is an object that only has a namespace, name and resource
// version, for a deletion whose last state etcd could not tell.
func (s *etcdStore[T]) newStub(namespace, name string, rev int64) T {
	obj := s.res.New()
	setMetadata(obj, &apiv1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rev})
	return obj
}

// setMetadata makes sure obj has metadata (md when it has none) and
// returns it. Generic code can read metadata but only set it through
// reflection.
func setMetadata(obj Object, md *apiv1.ObjectMeta) *apiv1.ObjectMeta {
	if got := obj.GetMetadata(); got != nil {
		return got
	}
	if md == nil {
		md = &apiv1.ObjectMeta{}
	}
	m := obj.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName("metadata"), protoreflect.ValueOfMessage(md.ProtoReflect()))
	return md
}

func clone[T Object](obj T) T {
	return proto.Clone(obj).(T)
}

// filter is a Selection with the etcd key (or prefix) it reads.
type filter struct {
	Selection
	key      string // exact key, or prefix when isPrefix
	isPrefix bool
}

func (s *etcdStore[T]) newFilter(namespace, name, selector string) (filter, error) {
	sel, err := s.res.Select(namespace, name, selector)
	if err != nil {
		return filter{}, err
	}
	// A name within a namespace (or of a cluster-scoped object) is one
	// key; a name in all namespaces needs the prefix and a name check.
	f := filter{Selection: sel}
	if name != "" && (namespace != "" || !s.res.Namespaced) {
		f.key, err = s.keys.key(namespace, name)
		return f, err
	}
	f.key, err = s.keys.prefix(namespace)
	f.isPrefix = true
	return f, err
}
