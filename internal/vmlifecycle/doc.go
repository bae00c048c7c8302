// Package vmlifecycle decides what the start, stop, restart, pause and
// unpause verbs do to a VirtualMachine and its current instance, as
// KubeVirt's virt-api does (pkg/virt-api/rest/lifecycle.go): either a spec
// change (spec.run_strategy / spec.running), a state-change request queued in
// status.state_change_requests for the VM controller to act on, or a refusal.
//
// The functions are pure: they mutate the objects they are given and do no
// I/O, so the API server can run them inside a compare-and-swap retry loop
// and tests can drive them from tables. On refusal they leave their inputs
// untouched.
package vmlifecycle
