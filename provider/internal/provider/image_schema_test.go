package provider

import "testing"

func TestImageSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewImageResource())
	ds := documentedDataSource(t, NewImageDataSource())
	mirrorsResource(t, rs, ds, "wait_for_nodes")
}
