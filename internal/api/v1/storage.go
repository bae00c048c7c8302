package apiv1

// KindStorageClass is the kind of StorageClass objects.
const KindStorageClass = "StorageClass"

// SelectsNode says whether the class's node selector matches a node's
// labels: every label of the selector, with its value.
func (sc *StorageClass) SelectsNode(labels map[string]string) bool {
	for k, v := range sc.GetSpec().GetNodeSelector() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
