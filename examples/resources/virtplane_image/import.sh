# Import by the image's name; images have no namespace.
terraform import virtplane_image.debian debian-12.qcow2
