package store_test

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// Every write of a fenced store commits only while its election term
// lasts; a refused one is ErrNotLeader, and other failures keep their own
// error while the term lasts.
func TestFencedWrites(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	ctx := t.Context()
	opts := testOptions(t)
	sess, err := concurrency.NewSession(c, concurrency.WithTTL(60))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, opts.Prefix+"/leader")
	if err := el.Campaign(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	fenced := opts
	fenced.LeaderTerm = &store.LeaderTerm{Key: el.Key(), Revision: el.Rev()}
	s, unfenced := store.New(c, store.VirtualMachines, fenced), store.New(c, store.VirtualMachines, opts)

	// While the term lasts, writes pass and fail as unfenced ones do.
	a := storetest.MustCreate(t, s, storetest.NewVM("ns", "a", nil, "virtplane.io/cleanup"))
	if _, err := s.Create(ctx, storetest.NewVM("ns", "a", nil)); !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("Create of an existing object: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.GuaranteedUpdate(ctx, "ns", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Spec.RunStrategy = "Always"
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, a); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Update from a stale read: %v, want ErrConflict", err)
	}
	if _, deleted, err := s.Delete(ctx, "ns", "a", store.DeleteOptions{}); err != nil || deleted {
		t.Fatalf("Delete with a finalizer: deleted=%v err=%v", deleted, err)
	}
	storetest.MustCreate(t, s, storetest.NewVM("ns", "b", nil))

	if err := el.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	a, err = s.Get(ctx, "ns", "a")
	if err != nil {
		t.Fatalf("reads are not fenced: %v", err)
	}
	a.Metadata.Finalizers = nil
	for what, err := range map[string]error{
		"create": func() error { _, err := s.Create(ctx, storetest.NewVM("ns", "c", nil)); return err }(),
		"update": func() error { _, err := s.Update(ctx, a); return err }(),
		"guaranteed update": func() error {
			_, err := s.GuaranteedUpdate(ctx, "ns", "b", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Spec.RunStrategy = "Manual"
				return vm, nil
			})
			return err
		}(),
		"delete": func() error { _, _, err := s.Delete(ctx, "ns", "b", store.DeleteOptions{}); return err }(),
	} {
		if !errors.Is(err, store.ErrNotLeader) || errors.Is(err, store.ErrConflict) {
			t.Errorf("%s after the term ended: %v, want ErrNotLeader", what, err)
		}
	}
	// Only the fence held them back: the same writes pass unfenced.
	if _, err := unfenced.Update(ctx, a); err != nil {
		t.Errorf("unfenced update: %v", err)
	}
	if _, _, err := unfenced.Delete(ctx, "ns", "b", store.DeleteOptions{}); err != nil {
		t.Errorf("unfenced delete: %v", err)
	}

	// A new term of the same session is another revision: the old fence
	// stays shut.
	if err := el.Campaign(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, storetest.NewVM("ns", "c", nil)); !errors.Is(err, store.ErrNotLeader) {
		t.Errorf("create in a later term: %v, want ErrNotLeader", err)
	}
}
