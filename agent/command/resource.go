package command

import (
	"fmt"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// resource is one kind of object the CLI knows by name.
type resource struct {
	Kind       string // "VirtualMachine": json/yaml kind and validation errors
	Singular   string // "virtualmachine": messages, like kubectl
	Namespaced bool
}

var (
	vmResource   = &resource{Kind: "VirtualMachine", Singular: "virtualmachine", Namespaced: true}
	vmiResource  = &resource{Kind: "VirtualMachineInstance", Singular: "virtualmachineinstance", Namespaced: true}
	nodeResource = &resource{Kind: "Node", Singular: "node"}
	// Images (pulled by nodes from a URL) have commands of their own
	// (image_api.go) that get and delete hand over to.
	imageResource = &resource{Kind: "Image", Singular: "image"}
	// Migrations are created by `migrate` and deleted (canceled) by
	// `migrate cancel` or `delete migration`.
	migrationResource = &resource{Kind: "VirtualMachineInstanceMigration", Singular: "migration", Namespaced: true}
	// Replica sets and pools keep many instances or VMs of one template;
	// `scale` sets how many.
	replicaSetResource = &resource{Kind: apiv1.KindReplicaSet, Singular: "virtualmachineinstancereplicaset", Namespaced: true}
	poolResource       = &resource{Kind: apiv1.KindPool, Singular: "virtualmachinepool", Namespaced: true}
	// Snapshots, their contents, restores and clones (docs/snapshots.md)
	// are made by `snapshot create`, `restore` and `clone`, or applied.
	snapshotResource        = &resource{Kind: apiv1.KindSnapshot, Singular: "virtualmachinesnapshot", Namespaced: true}
	snapshotContentResource = &resource{Kind: apiv1.KindSnapshotContent, Singular: "virtualmachinesnapshotcontent", Namespaced: true}
	restoreResource         = &resource{Kind: apiv1.KindRestore, Singular: "virtualmachinerestore", Namespaced: true}
	cloneResource           = &resource{Kind: apiv1.KindClone, Singular: "virtualmachineclone", Namespaced: true}
)

var resourceNames = map[string]*resource{
	"vm": vmResource, "vms": vmResource, "virtualmachine": vmResource, "virtualmachines": vmResource,
	"vmi": vmiResource, "vmis": vmiResource, "virtualmachineinstance": vmiResource, "virtualmachineinstances": vmiResource,
	"node": nodeResource, "nodes": nodeResource,
	"image": imageResource, "images": imageResource,
	"migration": migrationResource, "migrations": migrationResource, "vmim": migrationResource, "vmims": migrationResource,
	"virtualmachineinstancemigration": migrationResource, "virtualmachineinstancemigrations": migrationResource,
	"rs": replicaSetResource, "replicaset": replicaSetResource, "replicasets": replicaSetResource,
	"vmirs": replicaSetResource, "virtualmachineinstancereplicaset": replicaSetResource, "virtualmachineinstancereplicasets": replicaSetResource,
	"pool": poolResource, "pools": poolResource, "vmpool": poolResource, "vmpools": poolResource,
	"virtualmachinepool": poolResource, "virtualmachinepools": poolResource,
	// KubeVirt's names and short names (vmsnapshot, vmsnap, vmrestore,
	// vmclone), and the plain words.
	"vmsnapshot": snapshotResource, "vmsnapshots": snapshotResource, "vmsnap": snapshotResource, "vmsnaps": snapshotResource,
	"snapshot": snapshotResource, "snapshots": snapshotResource,
	"virtualmachinesnapshot": snapshotResource, "virtualmachinesnapshots": snapshotResource,
	"vmsnapshotcontent": snapshotContentResource, "vmsnapshotcontents": snapshotContentResource,
	"snapshotcontent": snapshotContentResource, "snapshotcontents": snapshotContentResource,
	"virtualmachinesnapshotcontent": snapshotContentResource, "virtualmachinesnapshotcontents": snapshotContentResource,
	"vmrestore": restoreResource, "vmrestores": restoreResource, "restore": restoreResource, "restores": restoreResource,
	"virtualmachinerestore": restoreResource, "virtualmachinerestores": restoreResource,
	"vmclone": cloneResource, "vmclones": cloneResource, "clone": cloneResource, "clones": cloneResource,
	"virtualmachineclone": cloneResource, "virtualmachineclones": cloneResource,
}

// resourceArgs is the completion list for the TYPE argument.
var resourceArgs = []string{"vm", "vmi", "rs", "pool", "node", "image", "migration", "vmsnapshot", "vmsnapshotcontent", "vmrestore", "vmclone"}

func lookupResource(name string) (*resource, error) {
	if r, ok := resourceNames[strings.ToLower(name)]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("unknown resource type %q (want vm, vmi, rs, pool, node, image, migration, vmsnapshot, vmsnapshotcontent, vmrestore or vmclone)", name)
}
