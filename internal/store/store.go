// Package store keeps API objects in etcd. Each object lives under
// <prefix>/<plural>/<namespace>/<name> as protobuf bytes; its resource
// version is the etcd ModRevision of its key, so it is never stored.
//
// # Roles
//
// Store is every operation on one resource; only the API server uses them
// all. Other code depends on the part it uses, declared where it is used:
// an informer takes a Watcher (informer package), and each controller
// declares the few writes it makes (the VMI controller only updates VMIs).
// So a read-only adapter (client/remotestore) has no write methods to stub,
// and a controller's test shows which writes it can make.
//
// # Fenced writes
//
// Controllers run only while their agent holds the leader election, but a
// leader paused past its session TTL (GC, SIGSTOP, a partition) may still
// write after another was elected. A store built with Options.LeaderTerm adds
// a compare on the election key to every write transaction: the write
// commits only while the key this term created still exists with the
// create revision the term won with (concurrency.Election's Key and Rev).
// A refused write fails with ErrNotLeader, told apart from a conflict by
// reading the key in the same transaction. Reads are not fenced, and the
// API server's own stores have no fence: its writes are users' requests.
//
// # Conformance
//
// storetest.RunConformance is the behaviour every backend must share: CAS
// conflicts, GuaranteedUpdate, finalizers, delete preconditions, list
// order and selectors, watch order, resume and re-list after compaction.
// It runs against this etcd store on real embedded etcd
// (conformance_test.go) and against memstore, the in-memory backend of
// controller unit tests (memstore/conformance_test.go):
//
//	go test -run TestConformance ./internal/store/ ./internal/store/memstore/
package store

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Sentinel errors; match with errors.Is. Returned errors wrap them with the
// object's kind and key.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: the object changed since the resource version the caller
	// read (compare-and-swap failed), or a delete precondition failed.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the call itself is malformed (missing name, zero resource
	// version on Update, ...).
	ErrInvalid = errors.New("invalid")
	// ErrNotLeader: a fenced store's write was refused because the leader
	// term it was built for has ended (Options.LeaderTerm).
	ErrNotLeader = errors.New("not leader")
	// ErrNotEmpty: a Namespace's deletion was refused because objects are
	// stored in it (Options.Accounting).
	ErrNotEmpty = errors.New("not empty")
)

// Object is any stored API object.
type Object interface {
	proto.Message
	GetMetadata() *apiv1.ObjectMeta
}

// Resource describes one kind of stored object.
type Resource[T Object] struct {
	Kind       string // "VirtualMachine"
	Plural     string // "virtualmachines", the key segment
	Namespaced bool
	New        func() T
}

var (
	VirtualMachines = register(Resource[*apiv1.VirtualMachine]{
		Kind: "VirtualMachine", Plural: "virtualmachines", Namespaced: true,
		New: func() *apiv1.VirtualMachine { return &apiv1.VirtualMachine{} },
	})
	VirtualMachineInstances = register(Resource[*apiv1.VirtualMachineInstance]{
		Kind: "VirtualMachineInstance", Plural: "virtualmachineinstances", Namespaced: true,
		New: func() *apiv1.VirtualMachineInstance { return &apiv1.VirtualMachineInstance{} },
	})
	Nodes = register(Resource[*apiv1.Node]{
		Kind: "Node", Plural: "nodes", Namespaced: false,
		New: func() *apiv1.Node { return &apiv1.Node{} },
	})
	Migrations = register(Resource[*apiv1.VirtualMachineInstanceMigration]{
		Kind: "VirtualMachineInstanceMigration", Plural: "virtualmachineinstancemigrations", Namespaced: true,
		New: func() *apiv1.VirtualMachineInstanceMigration { return &apiv1.VirtualMachineInstanceMigration{} },
	})
	Images = register(Resource[*apiv1.Image]{
		Kind: "Image", Plural: "images", Namespaced: false,
		New: func() *apiv1.Image { return &apiv1.Image{} },
	})
	StorageClasses = register(Resource[*apiv1.StorageClass]{
		Kind: apiv1.KindStorageClass, Plural: "storageclasses", Namespaced: false,
		New: func() *apiv1.StorageClass { return &apiv1.StorageClass{} },
	})
	ReplicaSets = register(Resource[*apiv1.VirtualMachineInstanceReplicaSet]{
		Kind: apiv1.KindReplicaSet, Plural: "virtualmachineinstancereplicasets", Namespaced: true,
		New: func() *apiv1.VirtualMachineInstanceReplicaSet { return &apiv1.VirtualMachineInstanceReplicaSet{} },
	})
	Pools = register(Resource[*apiv1.VirtualMachinePool]{
		Kind: apiv1.KindPool, Plural: "virtualmachinepools", Namespaced: true,
		New: func() *apiv1.VirtualMachinePool { return &apiv1.VirtualMachinePool{} },
	})
	Snapshots = register(Resource[*apiv1.VirtualMachineSnapshot]{
		Kind: apiv1.KindSnapshot, Plural: "virtualmachinesnapshots", Namespaced: true,
		New: func() *apiv1.VirtualMachineSnapshot { return &apiv1.VirtualMachineSnapshot{} },
	})
	SnapshotContents = register(Resource[*apiv1.VirtualMachineSnapshotContent]{
		Kind: apiv1.KindSnapshotContent, Plural: "virtualmachinesnapshotcontents", Namespaced: true,
		New: func() *apiv1.VirtualMachineSnapshotContent { return &apiv1.VirtualMachineSnapshotContent{} },
	})
	Restores = register(Resource[*apiv1.VirtualMachineRestore]{
		Kind: apiv1.KindRestore, Plural: "virtualmachinerestores", Namespaced: true,
		New: func() *apiv1.VirtualMachineRestore { return &apiv1.VirtualMachineRestore{} },
	})
	Clones = register(Resource[*apiv1.VirtualMachineClone]{
		Kind: apiv1.KindClone, Plural: "virtualmachineclones", Namespaced: true,
		New: func() *apiv1.VirtualMachineClone { return &apiv1.VirtualMachineClone{} },
	})
	Exports = register(Resource[*apiv1.VirtualMachineExport]{
		Kind: apiv1.KindExport, Plural: "virtualmachineexports", Namespaced: true,
		New: func() *apiv1.VirtualMachineExport { return &apiv1.VirtualMachineExport{} },
	})
	BackupTargets = register(Resource[*apiv1.BackupTarget]{
		Kind: apiv1.KindBackupTarget, Plural: "backuptargets", Namespaced: false,
		New: func() *apiv1.BackupTarget { return &apiv1.BackupTarget{} },
	})
	Backups = register(Resource[*apiv1.VirtualMachineBackup]{
		Kind: apiv1.KindBackup, Plural: "virtualmachinebackups", Namespaced: true,
		New: func() *apiv1.VirtualMachineBackup { return &apiv1.VirtualMachineBackup{} },
	})
	BackupSchedules = register(Resource[*apiv1.VirtualMachineBackupSchedule]{
		Kind: apiv1.KindBackupSchedule, Plural: "virtualmachinebackupschedules", Namespaced: true,
		New: func() *apiv1.VirtualMachineBackupSchedule { return &apiv1.VirtualMachineBackupSchedule{} },
	})
	BackupRestores = register(Resource[*apiv1.VirtualMachineBackupRestore]{
		Kind: apiv1.KindBackupRestore, Plural: "virtualmachinebackuprestores", Namespaced: true,
		New: func() *apiv1.VirtualMachineBackupRestore { return &apiv1.VirtualMachineBackupRestore{} },
	})
	Adoptions = register(Resource[*apiv1.VirtualMachineAdoption]{
		Kind: apiv1.KindAdoption, Plural: "virtualmachineadoptions", Namespaced: true,
		New: func() *apiv1.VirtualMachineAdoption { return &apiv1.VirtualMachineAdoption{} },
	})
	BootstrapTokens = register(Resource[*apiv1.BootstrapToken]{
		Kind: "BootstrapToken", Plural: "bootstraptokens", Namespaced: false,
		New: func() *apiv1.BootstrapToken { return &apiv1.BootstrapToken{} },
	})
	NodeCredentials = register(Resource[*apiv1.NodeCredential]{
		Kind: "NodeCredential", Plural: "nodecredentials", Namespaced: false,
		New: func() *apiv1.NodeCredential { return &apiv1.NodeCredential{} },
	})
	// The tenancy kinds (tenancy.proto).
	Namespaces = register(Resource[*apiv1.Namespace]{
		Kind: apiv1.KindNamespace, Plural: "namespaces", Namespaced: false,
		New: func() *apiv1.Namespace { return &apiv1.Namespace{} },
	})
	Users = register(Resource[*apiv1.User]{
		Kind: apiv1.KindUser, Plural: "users", Namespaced: false,
		New: func() *apiv1.User { return &apiv1.User{} },
	})
	ServiceAccounts = register(Resource[*apiv1.ServiceAccount]{
		Kind: apiv1.KindServiceAccount, Plural: "serviceaccounts", Namespaced: true,
		New: func() *apiv1.ServiceAccount { return &apiv1.ServiceAccount{} },
	})
	Credentials = register(Resource[*apiv1.Credential]{
		Kind: apiv1.KindCredential, Plural: "credentials", Namespaced: false,
		New: func() *apiv1.Credential { return &apiv1.Credential{} },
	})
	RoleBindings = register(Resource[*apiv1.RoleBinding]{
		Kind: apiv1.KindRoleBinding, Plural: "rolebindings", Namespaced: true,
		New: func() *apiv1.RoleBinding { return &apiv1.RoleBinding{} },
	})
	ClusterRoleBindings = register(Resource[*apiv1.ClusterRoleBinding]{
		Kind: apiv1.KindClusterRoleBinding, Plural: "clusterrolebindings", Namespaced: false,
		New: func() *apiv1.ClusterRoleBinding { return &apiv1.ClusterRoleBinding{} },
	})
)

// namespacedPlurals are the key segments of every namespaced kind, which
// a Namespace's deletion checks are empty (accounting.go). register
// keeps it whole: each Resource above is declared through it.
var namespacedPlurals []string

func register[T Object](r Resource[T]) Resource[T] {
	if r.Namespaced {
		namespacedPlurals = append(namespacedPlurals, r.Plural)
	}
	return r
}

// ListOptions filter List and Watch.
type ListOptions struct {
	Namespace     string // empty: all namespaces
	LabelSelector string // Kubernetes selector syntax
}

// WatchOptions select what a watch delivers.
type WatchOptions struct {
	ListOptions
	Name string // only this object, when set
	// ResourceVersion 0 starts with ADDED for every current object, then
	// SYNCED. Otherwise events after that revision; if it was compacted the
	// watch sends RESET, ADDED for every current object, SYNCED, and goes on.
	ResourceVersion int64
}

// DeleteOptions are preconditions of Delete.
type DeleteOptions struct {
	UID             string
	ResourceVersion int64
}

// Event is one watch event. For DELETED, Object is the last stored state
// with ResourceVersion set to the deletion revision. RESET and SYNCED carry
// no object. Err is set on the final event of a watch that broke.
type Event[T Object] struct {
	Type     apiv1.EventType
	Object   T
	Revision int64
	Err      error
}

// Store is the typed access to one resource: every operation, which the
// API server uses. Consumers that need less declare a narrower interface
// of their own (see the package documentation).
type Store[T Object] interface {
	// Create stores a new object: it sets uid, creation_timestamp and
	// generation 1 (when 0), and returns it with its resource version.
	Create(ctx context.Context, obj T) (T, error)
	Get(ctx context.Context, namespace, name string) (T, error)
	// List returns matching objects sorted by namespace/name and the
	// revision they were read at.
	List(ctx context.Context, opts ListOptions) ([]T, int64, error)
	// ListPage is List a page at a time (Kubernetes pagination): at most
	// limit objects are read (0: all), from where the continue token of
	// the previous page says and at that page's revision; the selector
	// filters within the page. Pages are in key order. Without a limit
	// and a token it is List. A bad token is ErrInvalid, a compacted
	// revision ErrExpired.
	ListPage(ctx context.Context, opts ListOptions, limit int64, cont string) (Page[T], error)
	// Update writes obj if its metadata.resource_version is still the stored
	// one (ErrConflict otherwise; 0 is ErrInvalid). An object that has a
	// deletion timestamp and no finalizers left is deleted instead.
	Update(ctx context.Context, obj T) (T, error)
	// GuaranteedUpdate reads the object, calls fn on a copy and writes the
	// result with compare-and-swap, retrying on conflict. If fn returns an
	// object equal to the input, nothing is written.
	GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(T) (T, error)) (T, error)
	// Delete removes the object, or when it has finalizers sets its
	// deletion timestamp and returns it (deleted=false).
	Delete(ctx context.Context, namespace, name string, opts DeleteOptions) (obj T, deleted bool, err error)
	// Watch streams events until ctx ends; the channel is then closed.
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event[T], error)
}
