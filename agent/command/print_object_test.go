package command

import (
	"bytes"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func printedVM() *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Namespace: "default", Name: "demo", ResourceVersion: 42,
			Labels:            map[string]string{"app": "demo"},
			CreationTimestamp: ago(time.Hour),
		},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: "Always",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "256Mi"}},
			}},
		},
		Status: &apiv1.VirtualMachineStatus{PrintableStatus: "Running", Ready: true},
	}
}

func TestPrintObject(t *testing.T) {
	tests := []struct {
		format string
		want   string
	}{
		{formatJSON, `{
    "kind": "VirtualMachine",
    "metadata": {
        "namespace": "default",
        "name": "demo",
        "resource_version": "42",
        "labels": {
            "app": "demo"
        },
        "creation_timestamp": "2025-06-01T11:00:00Z"
    },
    "spec": {
        "run_strategy": "Always",
        "template": {
            "spec": {
                "domain": {
                    "memory": {
                        "guest": "256Mi"
                    }
                }
            }
        }
    },
    "status": {
        "printable_status": "Running",
        "ready": true
    }
}
`},
		{formatYAML, `kind: VirtualMachine
metadata:
  creation_timestamp: "2025-06-01T11:00:00Z"
  labels:
    app: demo
  name: demo
  namespace: default
  resource_version: "42"
spec:
  run_strategy: Always
  template:
    spec:
      domain:
        memory:
          guest: 256Mi
status:
  printable_status: Running
  ready: true
`},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := printObject(&b, tt.format, printedVM()); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestPrintList(t *testing.T) {
	node := &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1"}}
	tests := []struct {
		format string
		items  []object
		want   string
	}{
		{formatYAML, []object{node, &apiv1.Node{}}, `items:
- kind: Node
  metadata:
    name: n1
- kind: Node
kind: List
`},
		{formatJSON, nil, `{
    "kind": "List",
    "items": []
}
`},
		{formatYAML, nil, `items: []
kind: List
`},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printList(&b, tt.format, tt.items); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("printList(%s, %d items):\n%s\nwant:\n%s", tt.format, len(tt.items), b.String(), tt.want)
		}
	}
}

func TestCheckFormat(t *testing.T) {
	if err := checkFormat("wide"); err == nil {
		t.Error(`checkFormat("wide") succeeded`)
	}
}
