package apiv1

// KindStorageClass is the kind of StorageClass objects.
const KindStorageClass = "StorageClass"

// StorageClassLocal is the built-in class: a file in the VM's directory
// on the node that made it. A persistent volume with no class is on it.
const StorageClassLocal = "local"

// IsLocal says whether the volume is on the built-in local class, which
// pins its VM to the node that made it.
func (pv *PersistentVolume) IsLocal() bool {
	c := pv.GetStorageClass()
	return c == "" || c == StorageClassLocal
}

// SelectsNode says whether the class's node selector matches a node's
// labels: every label of the selector, with its value.
func (sc *StorageClass) SelectsNode(labels map[string]string) bool {
	return selectsNode(sc.GetSpec().GetNodeSelector(), labels)
}

// selectsNode is the rule of an admin kind's node_selector (storage
// classes, backup targets): every label of sel, with its value.
func selectsNode(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// FenceOf is node's fence on the class (status.fences), or nil: while
// it is there, the node's QEMUs cannot reach the class's storage.
func (sc *StorageClass) FenceOf(node string) *StorageFence {
	for _, f := range sc.GetStatus().GetFences() {
		if f.GetNode() == node {
			return f
		}
	}
	return nil
}
