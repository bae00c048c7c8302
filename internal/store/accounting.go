package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nsquota"
)

// Namespace accounting (Options.Accounting). A namespace's
// status.used is what its objects ask (nsquota), and a write that changes
// it changes it in its own transaction: the write's compare, plus a
// compare on the Namespace key's mod revision as it was read, puts both.
// So two writers racing for a namespace's last slot cannot both pass the
// check: the second's compare fails, it reads the namespace again and is
// refused. Being in the store, it covers every writer: the API server
// and the controllers (pools make VMs, replica sets make instances,
// clones, restores and adoptions make VMs).
//
// A namespace with no Namespace object yet gets one, with no quota, in
// the same transaction as the first object created in it: namespaces are
// still made by first use, as before they were objects.

// ErrQuotaExceeded: a write would take a namespace beyond its quota.
// Returned errors are *QuotaExceededError, which wrap it.
var ErrQuotaExceeded = errors.New("exceeded quota")

// QuotaExceededError is a write refused by its namespace's quota: which
// namespace, and every bound the write would go beyond.
type QuotaExceededError struct {
	Namespace string
	Exceeded  []nsquota.Exceeded
}

// Error is Kubernetes' wording: "namespace a: exceeded quota: vcpus:
// requested 4, used 14, limited 16".
func (e *QuotaExceededError) Error() string { return nsquota.Message(e.Namespace, e.Exceeded) }

func (e *QuotaExceededError) Unwrap() error { return ErrQuotaExceeded }

// Charge is what obj asks of which namespace, for the kinds quotas count
// (VMs, instances with no VM, namespaces' images); ok is false for other
// kinds. The usage reconciler recomputes usage with it.
func Charge(obj Object) (namespace string, u nsquota.Usage, ok bool) {
	switch o := obj.(type) {
	case *apiv1.VirtualMachine:
		return o.GetMetadata().GetNamespace(), nsquota.OfVM(o), true
	case *apiv1.VirtualMachineInstance:
		return o.GetMetadata().GetNamespace(), nsquota.OfVMI(o), true
	case *apiv1.Image:
		return nsquota.ImageNamespace(o), nsquota.OfImage(o), true
	}
	return "", nsquota.Usage{}, false
}

// charged reports whether objects of res count against quotas.
func charged[T Object](res Resource[T]) bool {
	_, _, ok := Charge(res.New())
	return ok
}

// accounting is a store's part of it; nil when Options.Accounting is off.
type accounting struct {
	nsKeys keys
	clock  func() time.Time
	// charged: the resource's writes change usage, so updates and deletes
	// need the stored object they replace.
	charged bool
	// namespaced: a create makes sure its namespace has an object.
	namespaced bool
	// emptyRoots, in the Namespaces' store, are the key roots
	// ("<prefix>/<plural>/") of every namespaced kind: a Namespace is
	// deleted only while none holds a key under <root><name>/.
	emptyRoots []string
}

// deleteGuards are the compares a deletion of the object named name adds:
// for a Namespace, that no namespaced kind has an object in it. etcd
// compares every key of a range (a range with none compares as one key
// that does not exist), so a create in the namespace that commits before
// the deletion fails it, and one after finds no Namespace and makes it
// again (commitCharged): the store never keeps an object whose namespace
// has no Namespace, whatever the order of the writes.
func (a *accounting) deleteGuards(name string) []clientv3.Cmp {
	if a == nil {
		return nil
	}
	cmps := make([]clientv3.Cmp, 0, len(a.emptyRoots))
	for _, root := range a.emptyRoots {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(root+name+"/"), "=", 0).WithPrefix())
	}
	return cmps
}

// charges are the namespace changes of one write.
type charges struct {
	deltas map[string]nsquota.Usage // by namespace; none zero
	ensure string                   // a namespace that must exist, "" none
}

func (c charges) empty() bool { return len(c.deltas) == 0 && c.ensure == "" }

// plan is the changes of a write from old to new (nil for a create or an
// update of a kind not charged; nil new for a removal); create says the
// write makes the object.
func (a *accounting) plan(old, new Object, create bool) charges {
	var c charges
	if a == nil {
		return c
	}
	add := func(obj Object, sign int) {
		if obj == nil || obj.GetMetadata() == nil || !a.charged {
			return
		}
		ns, u, _ := Charge(obj)
		if ns == "" || u.IsZero() {
			return
		}
		if c.deltas == nil {
			c.deltas = map[string]nsquota.Usage{}
		}
		if sign < 0 {
			c.deltas[ns] = c.deltas[ns].Sub(u)
		} else {
			c.deltas[ns] = c.deltas[ns].Add(u)
		}
		if c.deltas[ns].IsZero() {
			delete(c.deltas, ns)
		}
	}
	add(old, -1)
	add(new, 1)
	if a.namespaced && create {
		c.ensure = new.GetMetadata().GetNamespace()
	}
	return c
}

// nsRead is one namespace as a charged transaction read it.
type nsRead struct {
	key        string
	createRev  int64 // 0: it did not exist
	modRev     int64
	mustChange bool // the transaction puts it
}

// holds reports whether kvs (the key read in the failed transaction's
// Else) is still the namespace as r read it.
func (r nsRead) holds(kvs []*mvccpb.KeyValue) bool {
	if len(kvs) == 0 {
		return r.createRev == 0
	}
	if r.mustChange {
		return kvs[0].ModRevision == r.modRev
	}
	return kvs[0].CreateRevision == r.createRev
}

// commitCharged is commit of "if cmp then thens else els" with ch applied
// to the namespaces in the same transaction. When only a namespace moved
// on (another write charged it) it reads again and retries; when cmp
// failed it returns the failed response for the caller to read els, as
// commit does. A refused increase is *QuotaExceededError.
func (s *etcdStore[T]) commitCharged(ctx context.Context, ch charges, cmp []clientv3.Cmp, thens []clientv3.Op, els ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if ch.empty() {
		return s.commit(ctx, cmp, thens, els...)
	}
	nss := slices.Sorted(maps.Keys(ch.deltas))
	if ch.ensure != "" && !slices.Contains(nss, ch.ensure) {
		nss = append(nss, ch.ensure)
	}
	for attempt := 1; ; attempt++ {
		cmps := slices.Clone(cmp)
		ops := slices.Clone(thens)
		gets := slices.Clone(els)
		reads := make([]nsRead, len(nss))
		for i, ns := range nss {
			r, c, op, err := s.chargeNamespace(ctx, ns, ch.deltas[ns])
			if err != nil {
				return nil, err
			}
			reads[i] = r
			cmps = append(cmps, c)
			if op != nil {
				ops = append(ops, *op)
			}
			gets = append(gets, clientv3.OpGet(r.key))
		}
		resp, err := s.commit(ctx, cmps, ops, gets...)
		if err != nil || resp.Succeeded {
			return resp, err
		}
		moved := false
		for i, r := range reads {
			if !r.holds(resp.Responses[len(els)+i].GetResponseRange().GetKvs()) {
				moved = true
			}
		}
		if !moved {
			return resp, nil
		}
		if attempt >= MaxConflictRetries {
			return nil, fmt.Errorf("namespace usage: giving up after %d attempts: %w", attempt, ErrConflict)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("namespace usage: %w", err)
		}
	}
}

// chargeNamespace reads namespace ns and returns the compare and the put
// (nil when delta is zero) that apply delta to it, or the quota's refusal.
func (s *etcdStore[T]) chargeNamespace(ctx context.Context, ns string, delta nsquota.Usage) (nsRead, clientv3.Cmp, *clientv3.Op, error) {
	key, err := s.acct.nsKeys.key("", ns)
	if err != nil {
		return nsRead{}, clientv3.Cmp{}, nil, err
	}
	r := nsRead{key: key, mustChange: !delta.IsZero()}
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return r, clientv3.Cmp{}, nil, fmt.Errorf("namespace %q: get: %w", ns, err)
	}
	var obj *apiv1.Namespace
	if len(resp.Kvs) == 0 {
		// Made by first use, with no quota.
		obj = &apiv1.Namespace{
			Metadata: &apiv1.ObjectMeta{Name: ns, Uid: uuid.NewString(), CreationTimestamp: timestamppb.New(s.acct.clock()), Generation: 1},
			Spec:     &apiv1.NamespaceSpec{},
		}
		r.mustChange = true
	} else {
		kv := resp.Kvs[0]
		r.createRev, r.modRev = kv.CreateRevision, kv.ModRevision
		obj = Namespaces.New()
		if err := decodeInto(kv.Value, obj); err != nil {
			return r, clientv3.Cmp{}, nil, fmt.Errorf("namespace %q: %w", ns, err)
		}
		used := nsquota.FromAPI(obj.GetStatus().GetUsed())
		if ex := nsquota.Check(obj.GetSpec().GetQuota(), used, delta); len(ex) > 0 {
			return r, clientv3.Cmp{}, nil, &QuotaExceededError{Namespace: ns, Exceeded: ex}
		}
	}
	if !r.mustChange {
		// The namespace is still the one read (not deleted and made again).
		return r, clientv3.Compare(clientv3.CreateRevision(key), "=", r.createRev), nil, nil
	}
	if obj.Status == nil {
		obj.Status = &apiv1.NamespaceStatus{}
	}
	// Usage below zero is drift (objects from before accounting); the
	// usage reconciler recomputes it, meanwhile it shows as nothing used.
	obj.Status.Used = nsquota.FromAPI(obj.Status.GetUsed()).Add(delta).NonNegative().ToAPI()
	data, err := encode(obj)
	if err != nil {
		return r, clientv3.Cmp{}, nil, fmt.Errorf("namespace %q: %w", ns, err)
	}
	op := clientv3.OpPut(key, string(data))
	if r.createRev == 0 {
		return r, clientv3.Compare(clientv3.Version(key), "=", 0), &op, nil
	}
	return r, clientv3.Compare(clientv3.ModRevision(key), "=", r.modRev), &op, nil
}

// storedAt is the object stored at key if it is still at revision rv;
// otherwise ErrConflict (with the object now stored) or ErrNotFound.
func (s *etcdStore[T]) storedAt(ctx context.Context, key, ref string, rv int64) (stored T, err error) {
	var zero T
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return zero, fmt.Errorf("%s %q: get: %w", s.keys.kind, ref, err)
	}
	if len(resp.Kvs) == 0 {
		return zero, fmt.Errorf("%s %q: %w", s.keys.kind, ref, ErrNotFound)
	}
	cur, err := s.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		return zero, err
	}
	if resp.Kvs[0].ModRevision != rv {
		return cur, fmt.Errorf("%s %q: %w: resource version %d, stored %d", s.keys.kind, ref, ErrConflict, rv, resp.Kvs[0].ModRevision)
	}
	return cur, nil
}
