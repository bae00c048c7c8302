package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func TestNetworkAttributePath(t *testing.T) {
	const nets = "spec.template.spec.networks"
	for field, want := range map[string]string{
		nets + "[2]":                                        "interface[2]",
		nets + "[2].name":                                   "interface[2].name",
		nets + "[0].bridge":                                 "interface[0].bridge",
		nets + "[0].bridge.bridge":                          "interface[0].bridge.name",
		nets + "[0].bridge.vlan":                            "interface[0].bridge.vlan",
		nets + "[1].network":                                "interface[1].network",
		nets + "[1].network.name":                           "interface[1].network.name",
		nets + "[0].user":                                   "interface[0].port_forward",
		nets + "[0].user.port_forwards[3]":                  "interface[0].port_forward[3]",
		nets + "[0].user.port_forwards[3].host_port":        "interface[0].port_forward[3].host_port",
		nets + "[0].user.port_forwards[1].guest_port":       "interface[0].port_forward[1].guest_port",
		nets + "[0].user.port_forwards[1].protocol":         "interface[0].port_forward[1].protocol",
		nets + "[0].user.port_forwards[1].host_address":     "interface[0].port_forward[1].host_address",
		nets + "[0].user.port_forwards[1].something.deeper": "interface[0].port_forward[1]",
		nets: "interface",
		"spec.template.spec.domain.devices.interfaces": "interface",
	} {
		p, ok := vmAttributePath(field)
		if !ok || p.String() != want {
			t.Errorf("vmAttributePath(%q) = %s, %v; want %s", field, p, ok, want)
		}
	}
}

// What only the agent checks of networks (two forwards on one port
// across interfaces; a bridge name too long for Linux) comes back on the
// attribute that set it.
func TestNetworkAgentErrorsLandOnAttributes(t *testing.T) {
	m := fullModel(t)
	m.Interfaces[0].PortForwards[1].HostPort = types.Int64Value(2222)
	m.Interfaces[0].PortForwards[1].Protocol = types.StringValue("tcp")
	m.Interfaces[0].PortForwards[1].HostAddress = types.StringValue("0.0.0.0")
	m.Interfaces[1].Bridge = &bridgeModel{Name: types.StringValue("a-bridge-name-too-long"), VLAN: types.Int64Null()}
	wantVMErrorsOn(t, m, "interface[0].port_forward[1].host_port", "interface[1].bridge.name")
}

func TestAttributePath(t *testing.T) {
	for field, want := range map[string]string{
		"metadata.name":                                                       "name",
		"metadata.namespace":                                                  "namespace",
		"metadata.labels":                                                     "labels",
		"metadata.labels[app]":                                                `labels["app"]`,
		"spec.run_strategy":                                                   "run_strategy",
		"spec.running":                                                        "run_strategy",
		"spec.node_failure_policy":                                            "node_failure_policy",
		"spec.template.metadata.annotations":                                  "annotations",
		"spec.template.spec.domain.memory.guest":                              "memory",
		"spec.template.spec.domain.cpu":                                       "cpu",
		"spec.template.spec.domain.cpu.cores":                                 "cpu.cores",
		"spec.template.spec.domain.devices.disks[1].name":                     "disk[1].name",
		"spec.template.spec.domain.devices.disks[2].disk.bus":                 "disk[2].bus",
		"spec.template.spec.domain.devices.disks[0].cdrom.bus":                "disk[0].bus",
		"spec.template.spec.domain.devices.disks[0].boot_order":               "disk[0].boot_order",
		"spec.template.spec.volumes[1]":                                       "disk[1]",
		"spec.template.spec.volumes[1].image.name":                            "disk[1].image",
		"spec.template.spec.volumes[0].persistent.size":                       "disk[0].persistent.size",
		"spec.template.spec.volumes[3].cloud_init_no_cloud.user_data":         "disk[3].cloud_init.user_data",
		"spec.template.spec.volumes[3].cloud_init_no_cloud":                   "disk[3].cloud_init",
		"spec.template.spec.domain.devices.interfaces[0].mac_address":         "interface[0].mac_address",
		"spec.template.spec.networks[1].name":                                 "interface[1].name",
		"spec.template.spec.domain.firmware.kernel_boot.kernel":               "boot.kernel",
		"spec.template.spec.domain.firmware.bootloader":                       "bootloader",
		"spec.template.spec.domain.firmware.bootloader.efi":                   "bootloader.efi",
		"spec.template.spec.domain.firmware.bootloader.efi.secure_boot":       "bootloader.efi.secure_boot",
		"spec.template.spec.node_selector[zone]":                              `node_selector["zone"]`,
		"spec.template.spec.termination_grace_period_seconds":                 "termination_grace_period",
		"spec.template.spec.eviction_strategy":                                "eviction_strategy",
		"spec.template.spec.domain.devices.disks[1].name[extra].nonsense.x.y": "disk[1]",
	} {
		p, ok := vmAttributePath(field)
		if !ok || p.String() != want {
			t.Errorf("vmAttributePath(%q) = %s, %v; want %s", field, p, ok, want)
		}
	}
	for _, field := range []string{"status.ready", "spec.template.spec.paused", "spec.template.metadata.labels", ""} {
		if p, ok := vmAttributePath(field); ok {
			t.Errorf("vmAttributePath(%q) = %s; want no attribute", field, p)
		}
	}
}

// The agent's own validation errors land on the attributes that caused
// them: build a VM the agent rejects, validate it as the agent does, and
// map its field violations back.
func TestAgentErrorsLandOnAttributes(t *testing.T) {
	m := fullModel(t)
	m.Disks[1].Image = types.StringValue("../escape.qcow2")
	m.Interfaces[0].MACAddress = types.StringValue("01:00:00:00:00:01") // multicast
	m.Disks = append(m.Disks, diskModel{Name: types.StringValue("root"), Image: types.StringValue("dup.qcow2")})
	wantVMErrorsOn(t, m, "disk[1].image", "interface[0].mac_address", "disk[3].name")
}

// wantVMErrorsOn validates the VM m asks for as the agent does and checks
// that its field violations land on the attributes at paths
// (wantErrorsOn).
func wantVMErrorsOn(t *testing.T, m vmModel, paths ...string) {
	t.Helper()
	vm, _ := vmFromModel(context.Background(), &m)
	validation.DefaultVirtualMachine(vm)
	err := validation.ToStatusError("VirtualMachine", "web", validation.ValidateVirtualMachine(vm, validation.Options{}))
	if err == nil {
		t.Fatal("the agent accepted an invalid VM")
	}
	wantErrorsOn(t, err, vmKind, paths...)
}
