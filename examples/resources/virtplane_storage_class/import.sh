# Import by the class's name; classes have no namespace. No read returns
# the key, so the state has none until the next apply writes the
# configured one (planned as an in-place update).
terraform import virtplane_storage_class.ceph ceph
