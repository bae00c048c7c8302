// Package provider is the virtplane Terraform provider: its configuration,
// resources and data sources.
//
// # One shape for every kind
//
// Each resource and data source is a kind, named in file names by a short
// prefix: vm (virtplane_virtual_machine), vms (virtplane_virtual_machines),
// image, pool (virtplane_virtual_machine_pool), replicaset
// (virtplane_virtual_machine_replica_set), snapshot, restore,
// node_maintenance, node_labels, storage_class, nodes and migrations. A kind's code is in files named
// <kind>_<part>.go, one part each, in this order of a request's life:
//
//   - resource: the resource type, its constructor, Metadata and
//     ImportState (Configure is configuredResource's, base.go).
//   - schema: Schema. Its descriptions are the documentation
//     (tfplugindocs renders them into docs/).
//   - validate: ValidateConfig, and the validators of the kind's own
//     attributes.
//   - plan: ModifyPlan, and the plan modifiers of the kind's own
//     attributes.
//   - model: the Terraform model, the struct the schema reads into, and the
//     object types of its computed attributes.
//   - convert: model to API object (fromModel), API object to model
//     (toModel) and the merge of the plan onto the stored object.
//   - crud: Create, Read, Update, Delete and setState.
//   - wait: what create and update wait for: the reads, watches and judges
//     (pure functions of what was read, tested without an agent).
//   - errors: how the kind words what goes wrong: its objectKind, the
//     attribute an agent's validation error is about, and why its waits
//     ended early.
//   - data_source: the data source of the kind. A data-source-only kind
//     (vms, nodes, migrations) has all its parts in this one file.
//
// A kind has the files of the parts it has (a restore has no plan). A part
// of under about 30 lines has no file of its own: it stays in
// <kind>_resource.go, after the resource, in the same order (a restore's
// model and errors, a snapshot's errors). A part with a topic of its own,
// or too long for one file, goes on in <kind>_<part>_<topic>.go:
// vm_wait_ip.go, vm_crud_snapshot.go, vm_plan_restart.go. Unit tests are
// in the _test.go file of the file whose code they test; acceptance tests
// (_acc_test.go) are named for the kind and what they exercise.
//
// Families share parts under a prefix of their own, in the same rule:
// template_*.go is what VMs and instances are made from (the
// virtplane_virtual_machine resource at its root, a pool in
// virtual_machine_template, a replica set in template), with
// template_schema_data.go its data sources' counterpart; replicas_*.go is
// what the pool and the replica set share, down to one implementation of
// their create, read, update and delete (replicaResource; each kind's
// crud file is its replicaOps); named_wait.go is the waits of the kinds
// that are one object run to a final phase (snapshot, restore, a VM's
// clone). A kind whose objects hold another kind's uses that kind's parts:
// a pool judges its VMs with judgeVM, a replica set quotes its instances
// with instanceReason.
//
// What every kind uses is in files named for what it is: base.go (the
// configured resource and data source types), errors.go (the diagnostics
// every kind words alike), ids.go (ids and imports), values.go (API values
// to Terraform values), conditions.go, fieldpaths.go, cas.go (updates by
// compare-and-swap), wait.go (the wait loop), validators.go and
// plan_modifiers.go (those of more than one kind), quantity_type.go. The
// provider itself is provider.go and config.go.
package provider
