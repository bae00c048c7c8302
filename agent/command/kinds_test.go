package command

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Every service of the API with Get and List serves a kind (its Get's
// response message), and the CLI's table has it with the calls the
// service offers; and the table has nothing the API does not serve.
func TestKindsCoverTheAPI(t *testing.T) {
	served := map[string]bool{}
	for _, svc := range apiv1.Services() {
		methods := svc.Methods()
		get, list := methods.ByName("Get"), methods.ByName("List")
		if get == nil || list == nil {
			continue
		}
		msg := get.Output()
		served[string(msg.Name())] = true
		i := slices.IndexFunc(kinds, func(r *resource) bool { return r.Kind == string(msg.Name()) })
		if i < 0 {
			t.Errorf("the API's %s serves %s, which the CLI's table of kinds lacks (kinds.go)", svc.FullName(), msg.Name())
			continue
		}
		res := kinds[i]
		has := func(name protoreflect.Name) bool { return methods.ByName(name) != nil }
		if res.getBy == nil {
			if got := res.calls.newObject().ProtoReflect().Descriptor().FullName(); got != msg.FullName() {
				t.Errorf("%s: the entry's object is %s, the API's Get answers %s", res.Kind, got, msg.FullName())
			}
			for name, call := range map[protoreflect.Name]bool{
				"Get": res.calls.get != nil, "List": res.calls.list != nil, "Watch": res.calls.watch != nil,
			} {
				if has(name) && !call {
					t.Errorf("%s: %s has %s, the CLI's entry has no call for it", res.Kind, svc.FullName(), name)
				}
			}
		}
		if has("Delete") && res.calls.delete == nil && res.deleteBy == nil && res.deleteRefusal == "" {
			t.Errorf("%s: %s has Delete, the CLI's entry neither deletes nor says why not", res.Kind, svc.FullName())
		}
		if has("Scale") != (res.calls.scale != nil) {
			t.Errorf("%s: %s has Scale: %v, the CLI's entry scales: %v", res.Kind, svc.FullName(), has("Scale"), res.calls.scale != nil)
		}
		if res.calls.create != nil && !has("Create") {
			t.Errorf("%s: the CLI's entry creates, %s has no Create", res.Kind, svc.FullName())
		}
		// A kind without Update is applied as immutable, never updated.
		if res.calls.create != nil && has("Update") == (res.calls.specDefaults != nil) {
			t.Errorf("%s: %s has Update: %v, yet the CLI's entry treats it as immutable: %v",
				res.Kind, svc.FullName(), has("Update"), res.calls.specDefaults != nil)
		}
	}
	for _, res := range kinds {
		if !served[res.Kind] {
			t.Errorf("the CLI's table of kinds has %s, which no service of the API serves", res.Kind)
		}
	}
}

// Each entry has what the commands need of it.
func TestKindsAreComplete(t *testing.T) {
	names := 0
	for _, res := range kinds {
		if res.Kind == "" || res.Singular == "" || len(res.names) == 0 {
			t.Errorf("%+v: kind, singular and names are required", res)
			continue
		}
		names += len(res.names)
		for _, n := range res.names {
			if n != strings.ToLower(n) {
				t.Errorf("%s: name %q is not lower case (lookupResource lowers what it is given)", res.Kind, n)
			}
		}
		if !slices.Contains(res.names, strings.ToLower(res.Kind)) {
			t.Errorf("%s: names %q lack %q, which apply looks the kind up by", res.Kind, res.names, strings.ToLower(res.Kind))
		}
		if n := btoi(res.calls.delete != nil) + btoi(res.deleteBy != nil) + btoi(res.deleteRefusal != ""); n != 1 {
			t.Errorf("%s: %d of delete, deleteBy and deleteRefusal set, want one", res.Kind, n)
		}
		if (res.calls.deleteWithSnapshots != nil || res.calls.deleted != nil) && res.calls.delete == nil {
			t.Errorf("%s: deleteWithSnapshots or deleted without delete", res.Kind)
		}
		if (res.calls.create != nil) != (res.calls.update != nil) {
			t.Errorf("%s: create without update or update without create: apply needs both", res.Kind)
		}
		if res.getBy != nil {
			continue
		}
		// A kind whose service has no Watch has no watch call
		// (TestKindsCoverTheAPI): get -w says so.
		if res.calls.get == nil || res.calls.list == nil || res.calls.row == nil || len(res.columns) == 0 {
			t.Errorf("%s: get needs get, list, row and columns (or getBy)", res.Kind)
			continue
		}
		if (res.calls.wide != nil) != (len(res.wideColumns) > 0) {
			t.Errorf("%s: wide and wideColumns go together", res.Kind)
		}
		// The rows fit the columns, even for an empty object.
		obj := res.calls.newObject()
		if kindOf(obj) != res.Kind {
			t.Errorf("%s: the entry's object is a %s", res.Kind, kindOf(obj))
		}
		for _, withNS := range []bool{false, true} {
			if h, r := tableHeader(res, withNS), tableRow(res, obj, time.Now(), withNS); len(h) != len(r) {
				t.Errorf("%s (-A %v): %d columns %q, a row of %d %q", res.Kind, withNS, len(h), h, len(r), r)
			}
		}
		if h, r := wideHeader(res), wideCells(res, obj); len(h) != len(r) {
			t.Errorf("%s: %d wide columns %q, wide cells %q", res.Kind, len(h), h, r)
		}
	}
	if names != len(resourceNames) {
		t.Errorf("%d names in the table, %d distinct: two kinds share a name", names, len(resourceNames))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// What the commands derive from the table reads as it did when they
// listed the kinds themselves.
func TestKindLists(t *testing.T) {
	if _, err := lookupResource("pods"); err == nil || err.Error() != `unknown resource type "pods" (want vm, vmi, rs, pool, node, image, storageclass, migration, vmsnapshot, vmsnapshotcontent, vmrestore, vmclone, vmexport, backuptarget, vmbackup, vmbackupschedule, vmbackuprestore, vmadoption, namespace, user, serviceaccount, credential, rolebinding or clusterrolebinding)` {
		t.Errorf("lookupResource(pods): %v", err)
	}
	for _, tt := range []struct {
		name      string
		got, want []string
	}{
		{"get", resourceArgs, []string{"vm", "vmi", "rs", "pool", "node", "image", "storageclass", "migration", "vmsnapshot", "vmsnapshotcontent", "vmrestore", "vmclone", "vmexport", "backuptarget", "vmbackup", "vmbackupschedule", "vmbackuprestore", "vmadoption", "namespace", "user", "serviceaccount", "credential", "rolebinding", "clusterrolebinding"}},
		{"delete", deleteArgs, []string{"vm", "rs", "pool", "image", "storageclass", "migration", "vmsnapshot", "vmsnapshotcontent", "vmrestore", "vmclone", "vmexport", "backuptarget", "vmbackup", "vmbackupschedule", "vmbackuprestore", "vmadoption", "namespace", "user", "serviceaccount", "credential", "rolebinding", "clusterrolebinding"}},
		{"scale", scaleArgs, []string{"rs", "pool"}},
	} {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s takes %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	const want = "VirtualMachine, VirtualMachineInstanceReplicaSet, VirtualMachinePool, StorageClass, VirtualMachineSnapshot, VirtualMachineRestore, VirtualMachineClone, BackupTarget, VirtualMachineBackup, VirtualMachineBackupSchedule, VirtualMachineBackupRestore, VirtualMachineAdoption, Namespace, User, ServiceAccount, RoleBinding or ClusterRoleBinding"
	if manifestKindList != want {
		t.Errorf("apply takes %q, want %q", manifestKindList, want)
	}
	if got := newDeleteCommand(&rootOptions{}).Use; got != "delete vm|rs|pool|image|storageclass|migration|vmsnapshot|vmsnapshotcontent|vmrestore|vmclone|vmexport|backuptarget|vmbackup|vmbackupschedule|vmbackuprestore|vmadoption|namespace|user|serviceaccount|credential|rolebinding|clusterrolebinding NAME..." {
		t.Errorf("delete's usage: %q", got)
	}
}

// A call a kind does not have is an error naming the kind, never a call
// on another kind's service (the client is nil: nothing may be called).
func TestMissingCallIsAnError(t *testing.T) {
	ctx := context.Background()
	unknown := &resource{Kind: "Pod", Singular: "pod"}
	vm := &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Name: "x"}}
	noop := func(apiv1.EventType, object) error { return nil }
	for _, tt := range []struct {
		call string
		err  error
	}{
		{"get", errOf(getObject(ctx, nil, unknown, "default", "x"))},
		{"get", errOf(getObject(ctx, nil, imageResource, "", "x"))},
		{"list", errOf(listObjects(ctx, nil, unknown, "", ""))},
		{"watch", watchObjects(ctx, nil, imageResource, &apiv1.WatchOptions{}, noop)},
		{"create", createObject(ctx, nil, nodeResource, vm)},
		{"update", errOf(updateObject(ctx, nil, migrationResource, vm))},
		{"delete", errOf(deleteObject(ctx, nil, vmiResource, &apiv1.ObjectKey{Name: "x"}, false))},
		{"delete with snapshots", errOf(deleteObject(ctx, nil, poolResource, &apiv1.ObjectKey{Name: "x"}, true))},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), "has no "+tt.call+" call in the CLI's table of kinds") {
			t.Errorf("%s of a kind without it: %v", tt.call, tt.err)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }
