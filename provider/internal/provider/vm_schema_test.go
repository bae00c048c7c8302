package provider

import (
	"testing"

	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

func TestVMSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewVMResource())
	ds := documentedDataSource(t, NewVMDataSource())
	documentedDataSource(t, NewVMsDataSource())
	mirrorsResource(t, rs, ds, "update_policy", "wait_for_ip", "source_snapshot")

	ud := rs.Blocks["disk"].(rschema.ListNestedBlock).NestedObject.Blocks["cloud_init"].(rschema.SingleNestedBlock).Attributes["user_data"]
	if !ud.IsSensitive() {
		t.Error("user_data must be sensitive")
	}
}
