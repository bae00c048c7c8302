# The quickstart `make demo` applies: three VMs of the tiny test guest
# (`make guest`), booted straight from its kernel and initramfs in the
# node image directory. The guest prints what it does on its serial
# console (`virtplane-agent console NAME`).

terraform {
  required_version = ">= 1.5"
  required_providers {
    virtplane = {
      source = "virtplane/virtplane"
    }
  }
}

# The agent's API: VIRTPLANE_ENDPOINT (make demo exports it), else the
# local socket unix:///run/virtplane/agent.sock. See docs/index.md.
provider "virtplane" {}

locals {
  # Console on the serial port, a quiet and fast boot under TCG; the
  # virtplane.* flags are the test guest's (internal/testguest/README.md).
  cmdline = "console=ttyS0 quiet panic=-1 cryptomgr.notests tsc=reliable no_timer_check audit=0 8250.nr_uarts=1"
}

# A server: runs until destroyed and is restarted whenever it stops.
# apply returns once it is Running and ready.
resource "virtplane_virtual_machine" "hello" {
  name         = "hello"
  run_strategy = "Always"
  memory       = "160Mi"

  boot {
    kernel = "vmlinux"
    initrd = "initrd.img"
    # cidata: print the cloud-init user data; persist: count boots on
    # the persistent disk, the first virtio disk (/dev/vda).
    cmdline = "${local.cmdline} virtplane.hostname=hello virtplane.cidata=1 virtplane.persist=/dev/vda"
  }

  # A blank disk kept across restarts, deleted with the VM.
  disk {
    name = "data"
    persistent {
      size = "64Mi"
    }
  }

  # cloud-init NoCloud seed, attached as a CD-ROM.
  disk {
    name = "seed"
    cloud_init {
      user_data = <<-EOT
        #cloud-config
        hostname: hello
        write_files:
          - path: /etc/motd
            content: Hello from virtplane and Terraform!
      EOT
    }
  }

  # Destroy presses the power button; this guest powers off at once.
  termination_grace_period = 10
}

# A job: runs once and is never restarted. This guest powers itself off
# after 5 seconds, so the VM ends Stopped and its instance Succeeded.
# apply returns once it runs (or already ran).
resource "virtplane_virtual_machine" "once" {
  name         = "once"
  run_strategy = "Once"
  memory       = "160Mi"

  boot {
    kernel  = "vmlinux"
    initrd  = "initrd.img"
    cmdline = "${local.cmdline} virtplane.hostname=once virtplane.poweroff_after=5"
  }
}

# A web service on user-mode networking (outbound NAT), published on the
# host's loopback: `curl http://127.0.0.1:18080/` is answered by the
# guest's own HTTP server on port 80. apply also waits until the guest
# reports its address (its guest agent says; a libvirt network's DHCP
# lease or a bridge's neighbour table would for other kinds).
resource "virtplane_virtual_machine" "web" {
  name         = "web"
  run_strategy = "Always"
  memory       = "160Mi"

  boot {
    kernel = "vmlinux"
    initrd = "initrd.img"
    # http: answer HTTP on port 80 with the hostname; ga: a guest agent.
    cmdline = "${local.cmdline} virtplane.hostname=web virtplane.http=80 virtplane.ga=1"
  }

  interface {
    name = "default"
    port_forward {
      host_port  = 18080
      guest_port = 80
      # host_address defaults to 127.0.0.1: nothing is published to the
      # network by accident.
    }
  }

  wait_for_ip {
    timeout = "3m"
  }

  termination_grace_period = 10
}

output "web" {
  value = {
    url         = "http://127.0.0.1:18080/"
    guest_ip    = virtplane_virtual_machine.web.status.interfaces[0].ip_address
    ip_from     = virtplane_virtual_machine.web.status.interfaces[0].source
    mac_address = virtplane_virtual_machine.web.status.interfaces[0].mac_address
  }
}

output "hello" {
  value = {
    status = virtplane_virtual_machine.hello.status.printable_status
    node   = virtplane_virtual_machine.hello.status.node
  }
}
