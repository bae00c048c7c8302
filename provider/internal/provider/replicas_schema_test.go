package provider

import "testing"

func TestReplicaSchemasDocumentEveryAttribute(t *testing.T) {
	pool := documentedResource(t, NewPoolResource())
	mirrorsResource(t, pool, documentedDataSource(t, NewPoolDataSource()), "wait_for_ready")
	rs := documentedResource(t, NewReplicaSetResource())
	mirrorsResource(t, rs, documentedDataSource(t, NewReplicaSetDataSource()), "wait_for_ready")
}
