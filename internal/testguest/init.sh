#!/bin/sh
# /init of the virtplane test guest (busybox sh, PID 1 in the initramfs).
# See internal/testguest/README.md. PID 1 must never exit (the kernel
# panics if it does), so every path ends in poweroff, a crash or the idle
# loop. The same file is the power-off helper: acpid and the poweroff timer
# run "/init --virtplane-poweroff REASON", and udhcpc's event script runs
# "/init --virtplane-dhcp EVENT" (never as PID 1). The guest agent
# stand-in is ga.sh, /etc/virtplane/ga.sh in the guest.

export PATH=/bin
# Kernel command line words are data: never glob them.
set -f

# say prints one marker line where the test harness reads it: the kernel
# console, and also ttyS0 when the console is elsewhere (console=tty0).
say() {
	echo "$*" >/dev/console 2>/dev/null
	if ! grep -qw ttyS0 /sys/class/tty/console/active 2>/dev/null; then
		echo "$*" >/dev/ttyS0 2>/dev/null
	fi
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

poweroff_now() {
	say "VIRTPLANE-GUEST-POWEROFF reason=$1 uptime=$(uptime_s)"
	umount /mnt/cidata 2>/dev/null
	sync
	# -f: reboot(2) directly; there is no init daemon to signal.
	poweroff -f
	# Only reached if the kernel refused.
	say "VIRTPLANE-GUEST-WARNING poweroff failed"
	exit 1
}

if [ "$1" = --virtplane-poweroff ] && [ "$$" != 1 ]; then
	poweroff_now "${2:-unknown}"
fi

# udhcpc's event script: the lease is in the environment ($ip, $mask as
# a prefix length, $router and $dns as space-separated lists). The lease
# is also written to /run/net.lease as shell assignments for /init.
if [ "$1" = --virtplane-dhcp ] && [ "$$" != 1 ]; then
	case "$2" in
	deconfig)
		ip -4 addr flush dev "$interface"
		ip link set "$interface" up
		;;
	bound | renew)
		ip -4 addr flush dev "$interface"
		ip addr add "$ip/${mask:-24}" dev "$interface" || exit 1
		gw=${router%% *}
		if [ -n "$gw" ]; then
			ip route add default via "$gw" dev "$interface" || exit 1
		fi
		dnslist=$(echo $dns | tr ' ' ,)
		echo "ip=$ip/${mask:-24} router=$gw dns=$dnslist" >/run/net.lease
		;;
	esac
	exit 0
fi

# ciuser prints the first entry of the "users:" list of a #cloud-config
# user-data file as "name <name>" and one "key <key>" line per
# ssh_authorized_keys item, and exits 3 without output when the file
# does not start with the #cloud-config header. It reads a documented
# subset of YAML (README.md): block lists and mappings indented with
# spaces, plain or quoted scalars, a one-line [a, b] key list, comments.
# An entry that is a plain scalar (cloud-init's "- default") is skipped.
ciuser() {
	awk '
	function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
	# scalar: a quoted scalar up to its closing quote (no escapes), or
	# a plain one up to a comment.
	function scalar(s,   q, i) {
		s = trim(s)
		q = substr(s, 1, 1)
		if (q == "\"" || q == "\047") {
			i = index(substr(s, 2), q)
			if (i > 0) return substr(s, 2, i - 1)
		}
		sub(/[ \t]+#.*$/, "", s)
		return s
	}
	function indent(s) { match(s, /^ */); return RLENGTH }
	# field handles "key: value" of the current entry.
	function field(text, ind,   k, v, n, i, parts) {
		k = text; sub(/:.*/, "", k)
		v = text; sub(/^[^:]*:/, "", v); v = trim(v)
		inkeys = 0
		if (k == "name") name = scalar(v)
		if (k != "ssh_authorized_keys") return
		if (v == "") { inkeys = 1; keysind = ind; return }
		if (v ~ /^\[.*\]$/) {
			n = split(substr(v, 2, length(v) - 2), parts, ",")
			for (i = 1; i <= n; i++) if (trim(parts[i]) != "") keys[nkeys++] = scalar(parts[i])
		}
	}
	{ sub(/\r$/, "") }
	NR == 1 { if ($0 !~ /^#cloud-config[ \t]*$/) exit 3; next }
	/^[ \t]*(#.*)?$/ { next }
	!inusers { if ($0 ~ /^users:[ \t]*(#.*)?$/) { inusers = 1; itemind = -1 }; next }
	{
		ind = indent($0); text = trim($0)
		if (text ~ /^-( |$)/ && (itemind < 0 || ind <= itemind)) {
			if (name != "") exit
			itemind = ind; inentry = 0; inkeys = 0; nkeys = 0
			rest = trim(substr(text, 2))
			if (rest ~ /^[A-Za-z0-9_-]+:( |$)/) { inentry = 1; field(rest, ind + 2) }
			next
		}
		if (ind == 0) exit
		if (inkeys && text ~ /^-( |$)/ && ind >= keysind) { keys[nkeys++] = scalar(substr(text, 2)); next }
		if (inentry && text ~ /^[A-Za-z0-9_-]+:( |$)/) field(text, ind)
	}
	END {
		if (name == "") exit
		print "name " name
		for (i = 0; i < nkeys; i++) if (keys[i] != "") print "key " keys[i]
	}' "$1"
}

if [ "$1" = --virtplane-ciuser ] && [ "$$" != 1 ]; then
	ciuser "$2"
	exit $?
fi

isnum() { case "$1" in '' | *[!0-9]*) return 1 ;; esac; }
istrue() { case "$1" in 1 | y | yes | true | on) return 0 ;; esac; return 1; }
warn() { say "VIRTPLANE-GUEST-WARNING $*"; }
# For the command line loop below: numopt NAME sets the variable NAME (a
# literal) to the option's value $val if that is a number, else warns
# about $arg; flagopt NAME sets it to 1 if $val is true, else empties it.
numopt() { if isnum "$val"; then eval "$1=\$val"; else warn "ignoring bad $arg"; fi; }
flagopt() { if istrue "$val"; then eval "$1=1"; else eval "$1="; fi; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
# Without devtmpfs /dev holds only the console node the cpio carried.
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /mnt/cidata
exec </dev/console >/dev/console 2>&1

# --- kernel command line -------------------------------------------------
host=virtplane-guest
poweroff_after=
crash=
crash_after=0
cidata=
persist=
persist_every=
disksize=
blockwatch=
wait_dev=30
net=
netprobe=
tick=
dirty=
static_ip=
static_gw=
http_port=
ga=
for arg in $(cat /proc/cmdline); do
	val=${arg#*=}
	case "$arg" in
	virtplane.hostname=*)
		case "$val" in
		'' | *[!A-Za-z0-9.-]*) warn "ignoring bad $arg" ;;
		*) host=$val ;;
		esac
		;;
	virtplane.poweroff_after=*) numopt poweroff_after ;;
	virtplane.crash) crash=1 ;;
	virtplane.crash=*) flagopt crash ;;
	virtplane.crash_after=*) numopt crash_after ;;
	virtplane.cidata) cidata=1 ;;
	virtplane.cidata=*) flagopt cidata ;;
	virtplane.persist=*)
		case "$val" in
		/dev/[a-z]*) persist=$val ;;
		*) warn "ignoring bad $arg" ;;
		esac
		;;
	virtplane.persist_every=*) numopt persist_every ;;
	virtplane.disksize=*)
		case "$val" in
		/dev/[a-z]*) disksize=$val ;;
		*) warn "ignoring bad $arg" ;;
		esac
		;;
	virtplane.device_timeout=*) numopt wait_dev ;;
	virtplane.blockwatch) blockwatch=1 ;;
	virtplane.blockwatch=*) flagopt blockwatch ;;
	virtplane.net) net=1 ;;
	virtplane.net=*) flagopt net ;;
	virtplane.tick) tick=1 ;;
	virtplane.tick=*) flagopt tick ;;
	virtplane.dirty=*) numopt dirty ;;
	virtplane.ip=*)
		# ADDR/PREFIX[,GATEWAY], IPv4 or IPv6 literals.
		addr=${val%%,*} gw=
		[ "$addr" = "$val" ] || gw=${val#*,}
		pfx=${addr#*/}
		case "$addr/$gw" in
		*[!0-9A-Fa-f.:/]*) warn "ignoring bad $arg" ;;
		*)
			if [ "$pfx" != "$addr" ] && isnum "$pfx" && [ -n "${addr%%/*}" ]; then
				static_ip=$addr static_gw=$gw net=1
			else
				warn "ignoring bad $arg"
			fi
			;;
		esac
		;;
	virtplane.http=*)
		if isnum "$val" && [ "$val" -ge 1 ] && [ "$val" -le 65535 ]; then
			http_port=$val net=1
		else
			warn "ignoring bad $arg"
		fi
		;;
	virtplane.ga) ga=1 ;;
	virtplane.ga=*) flagopt ga ;;
	virtplane.netprobe=*)
		# Comma-separated HOST:PORT, IPv6 as [ADDR]:PORT: IP literals only.
		case "$val" in
		'' | *[!]0-9A-Fa-f.:[,]*) warn "ignoring bad $arg" ;;
		*) netprobe=$val net=1 ;;
		esac
		;;
	esac
done
set +f
hostname "$host"

# --- modules -------------------------------------------------------------
# The builder lists each group in dependency order (from the modules'
# .modinfo depends=), so plain insmod is enough.
# Groups may share modules (virtio_pci: disks and NICs); one another group
# loaded already is skipped (sysfs names use '_' for '-').
load_modules() {
	[ -f "/etc/virtplane/modules.$1" ] || return 0
	while read -r m; do
		[ -n "$m" ] || continue
		[ -d "/sys/module/$(echo "${m%.ko}" | tr - _)" ] && continue
		insmod "/lib/modules/$m" || warn "insmod $m failed"
	done <"/etc/virtplane/modules.$1"
}
load_modules base

# ACPI power button (button.ko) -> input event (evdev.ko) -> acpid ->
# /etc/acpi/PWRF/00000080 -> /init --virtplane-poweroff acpi.
if [ -e /dev/input/event0 ]; then
	acpid -c /etc/acpi -a /etc/acpid.conf -l /run/acpid.log -p /run/acpid.pid
	# acpid forks before it opens the event devices and writes its pid
	# file after: a button press before that would be lost.
	i=0
	while [ ! -s /run/acpid.pid ] && [ "$i" -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -s /run/acpid.pid ] || warn "acpid did not start: ACPI shutdown will not work"
else
	warn "no input event device: ACPI shutdown will not work"
fi

# The kernel has /sys/firmware/efi only when EFI firmware started it
# (OVMF); SeaBIOS and QEMU's direct kernel boot leave none.
firmware=bios
[ -d /sys/firmware/efi ] && firmware=efi

# Printed once the guest reacts to the power button.
say "VIRTPLANE-GUEST-BOOTED hostname=$(hostname) uptime=$(uptime_s) firmware=$firmware"

# --- disks ---------------------------------------------------------------
if [ -n "$cidata" ] || [ -n "$persist" ] || [ -n "$disksize" ] || [ -n "$blockwatch" ]; then
	load_modules storage
fi

# iso_label prints the volume label of an ISO 9660 device: the primary
# volume descriptor is sector 16 (byte 32768), "CD001" at byte 1 and the
# 32-byte space-padded volume identifier at byte 40.
iso_label() {
	[ "$(dd if="$1" bs=1 skip=32769 count=5 2>/dev/null)" = CD001 ] || return 1
	dd if="$1" bs=1 skip=32808 count=32 2>/dev/null | tr -d ' \000'
}

find_cidata() {
	for d in /dev/sr* /dev/vd* /dev/sd*; do
		[ -b "$d" ] || continue
		case "$(iso_label "$d")" in
		cidata | CIDATA) echo "$d" && return 0 ;;
		esac
	done
	return 1
}

# print_file prints a file between two markers, ending the file's last
# line so the END marker is always a line of its own.
print_file() {
	say "$1"
	if [ -f "$2" ]; then
		cat "$2" >/dev/console
		[ -s "$2" ] && [ "$(tail -c 1 "$2" | wc -l)" = 0 ] && echo >/dev/console
	fi
	say "$3"
}

# ciuser_setup makes the first cloud-config user (uid 1000, home
# /home/NAME, NAME's ssh_authorized_keys in ~/.ssh/authorized_keys) as
# cloud-init's users module would, and says so with one line: the name,
# the number of keys and the SHA-256 of each key line as written, at
# most 8 (key0=...).
ciuser_setup() {
	ciuser "$1" >/tmp/ciuser || return 0
	name=$(grep '^name ' /tmp/ciuser | cut -c6-)
	[ -n "$name" ] || return 0
	case "$name" in
	[a-z_]*) ;;
	*) warn "cloud-init: bad user name" ; return 0 ;;
	esac
	case "$name" in
	*[!a-z0-9_-]*) warn "cloud-init: bad user name" ; return 0 ;;
	esac
	[ "${#name}" -le 32 ] || { warn "cloud-init: user name over 32 characters"; return 0; }
	home=/home/$name
	mkdir -p "$home/.ssh"
	grep '^key ' /tmp/ciuser | cut -c5- >"$home/.ssh/authorized_keys"
	[ -f /etc/passwd ] || echo "root:x:0:0:root:/root:/bin/sh" >/etc/passwd
	[ -f /etc/group ] || echo "root:x:0:" >/etc/group
	echo "$name:x:1000:1000:$name:$home:/bin/sh" >>/etc/passwd
	echo "$name:x:1000:" >>/etc/group
	chown -R 1000:1000 "$home"
	chmod 0700 "$home" "$home/.ssh"
	chmod 0600 "$home/.ssh/authorized_keys"
	n=0
	sums=
	while IFS= read -r key; do
		[ "$n" -lt 8 ] && sums="$sums key$n=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)"
		n=$((n + 1))
	done <"$home/.ssh/authorized_keys"
	say "VIRTPLANE-GUEST-CLOUDINIT-USER name=$name uid=1000 home=$home keys=$n$sums"
}

if [ -n "$cidata" ]; then
	dev=
	i=0
	# Disks appear asynchronously after insmod (SCSI scanning, ATA probes).
	while [ "$i" -lt "$wait_dev" ]; do
		dev=$(find_cidata) && break
		sleep 1
		i=$((i + 1))
	done
	if [ -z "$dev" ]; then
		warn "cidata: no ISO 9660 device labelled cidata"
	elif ! mount -t iso9660 -o ro "$dev" /mnt/cidata; then
		warn "cidata: mount $dev failed"
	else
		print_file VIRTPLANE-USERDATA-BEGIN /mnt/cidata/user-data VIRTPLANE-USERDATA-END
		print_file VIRTPLANE-METADATA-BEGIN /mnt/cidata/meta-data VIRTPLANE-METADATA-END
		ciuser_setup /mnt/cidata/user-data
	fi
fi

if [ -n "$persist" ]; then
	i=0
	while [ ! -b "$persist" ] && [ "$i" -lt "$wait_dev" ]; do
		sleep 1
		i=$((i + 1))
	done
	if [ ! -b "$persist" ]; then
		warn "persist: $persist is not a block device"
	else
		prev=$(dd if="$persist" bs=512 count=1 2>/dev/null | tr -d '\000' | head -n 1)
		n=0
		case "$prev" in
		"VIRTPLANE-PERSIST boot="*)
			n=${prev#VIRTPLANE-PERSIST boot=}
			isnum "$n" || n=0
			;;
		*) prev=none ;;
		esac
		say "VIRTPLANE-PERSIST-PREVIOUS $prev"
		n=$((n + 1))
		# One zero-padded sector, so no older, longer line survives.
		echo "VIRTPLANE-PERSIST boot=$n" >/tmp/persist
		truncate -s 512 /tmp/persist
		if dd if=/tmp/persist of="$persist" bs=512 count=1 conv=notrunc,fsync 2>/dev/null && sync; then
			say "VIRTPLANE-PERSIST-WROTE boot=$n"
		else
			warn "persist: write to $persist failed"
		fi
		# virtplane.persist_every=S: a write counter in the second
		# sector, carried on from the last boot's and written every S
		# seconds, each write said to have worked or failed: a guest
		# cut off its storage shows its first failed write, and the
		# next boot elsewhere goes on from the last one that worked.
		if [ -n "$persist_every" ] && [ "$persist_every" -gt 0 ]; then
			wprev=$(dd if="$persist" bs=512 skip=1 count=1 2>/dev/null | tr -d '\000' | head -n 1)
			k=0
			case "$wprev" in
			"VIRTPLANE-PERSIST writes="*)
				k=${wprev#VIRTPLANE-PERSIST writes=}
				isnum "$k" || k=0
				;;
			esac
			say "VIRTPLANE-PERSIST-WRITES-PREVIOUS writes=$k"
			(
				while :; do
					next=$((k + 1))
					echo "VIRTPLANE-PERSIST writes=$next" >/tmp/persist-w
					truncate -s 512 /tmp/persist-w
					if dd if=/tmp/persist-w of="$persist" bs=512 seek=1 count=1 conv=notrunc,fsync 2>/dev/null; then
						k=$next
						say "VIRTPLANE-PERSIST-WRITE writes=$k"
					else
						say "VIRTPLANE-PERSIST-WRITE-FAILED writes=$next"
					fi
					sleep "$persist_every"
				done
			) &
		fi
	fi
fi

# virtplane.disksize prints the size the guest sees of a disk, and again
# each time it changes: a disk grown online (libvirt's block resize) is
# announced by QEMU, and the kernel reads the new capacity into sysfs
# (/sys/class/block/X/size counts 512-byte sectors whatever the disk's
# block size). Looked at every 0.5 s, in the background.
if [ -n "$disksize" ]; then
	(
		sys=/sys/class/block/${disksize#/dev/}/size
		i=0
		while [ ! -b "$disksize" ] && [ "$i" -lt "$wait_dev" ]; do
			sleep 1
			i=$((i + 1))
		done
		if [ ! -b "$disksize" ] || [ ! -r "$sys" ]; then
			warn "disksize: $disksize is not a block device"
			exit 0
		fi
		last=
		while :; do
			s=$(cat "$sys" 2>/dev/null)
			if isnum "$s" && [ "$s" != "$last" ]; then
				say "VIRTPLANE-DISK-SIZE dev=$disksize bytes=$((s * 512))"
				last=$s
			fi
			sleep 0.5
		done
	) &
fi

# --- network -------------------------------------------------------------
# virtplane.net brings the first NIC up by DHCP (QEMU user networking:
# 10.0.2.15/24, gateway 10.0.2.2, and IPv6 by router advertisement), or
# with virtplane.ip's static address.
# virtplane.netprobe also fetches http://TARGET/ for each target and says
# whether the guest reached it, so tests can check what a guest reaches.

# oneword keeps a marker field one word: the first line of its input,
# anything but [A-Za-z0-9._:/=-] turned into '_', at most 120 bytes.
oneword() { head -n 1 | tr -d '\r\n' | tr -c 'A-Za-z0-9._:/=-' _ | head -c 120; }

net_if=
router=
if [ -n "$net" ]; then
	load_modules net
	ip link set lo up
	i=0
	while [ -z "$net_if" ] && [ "$i" -lt "$wait_dev" ]; do
		for d in /sys/class/net/*; do
			case "${d##*/}" in
			lo | '*') ;;
			*) net_if=${d##*/} && break ;;
			esac
		done
		[ -n "$net_if" ] || sleep 1
		i=$((i + 1))
	done
	if [ -z "$net_if" ]; then
		warn "net: no network interface"
	else
		# No duplicate address detection: the SLAAC address is usable
		# as soon as the router advertisement arrives.
		echo 0 >"/proc/sys/net/ipv6/conf/$net_if/accept_dad"
		ip link set "$net_if" up
		if [ -n "$static_ip" ]; then
			# virtplane.ip: no DHCP (a bridge in a test has no server).
			if ip addr add "$static_ip" dev "$net_if" &&
				{ [ -z "$static_gw" ] || ip route add default via "$static_gw" dev "$net_if"; }; then
				ip=$static_ip router=$static_gw dns=
				say "VIRTPLANE-NET-UP iface=$net_if ip=$ip router=$router dns=$dns"
			else
				warn "net: cannot set $static_ip${static_gw:+ via $static_gw} on $net_if"
				net_if=
			fi
		elif udhcpc -i "$net_if" -s /etc/virtplane/udhcpc.script -n -q -t 5 -T 1 >/dev/null 2>&1 && [ -s /run/net.lease ]; then
			. /run/net.lease
			say "VIRTPLANE-NET-UP iface=$net_if ip=$ip router=$router dns=$dns"
		else
			warn "net: no DHCP lease on $net_if"
			net_if=
		fi
	fi
fi

# route_loopback sends 127.0.0.0/8 out of the NIC instead of to lo. A
# hostile guest need not name the gateway to reach the host: it may send
# packets for 127.0.0.1 itself. Its own stack keeps them (127.0.0.1 is on
# lo, and 127/8 is martian elsewhere) until the address goes and
# route_localnet allows it; what remains is what the host side makes of
# such packets.
lo_routed=
route_loopback() {
	[ -z "$lo_routed" ] || return 0
	lo_routed=1
	echo 1 >/proc/sys/net/ipv4/conf/all/route_localnet
	echo 1 >"/proc/sys/net/ipv4/conf/$net_if/route_localnet"
	ip addr del 127.0.0.1/8 dev lo
	ip route add 127.0.0.0/8 via "$router" dev "$net_if" || warn "netprobe: cannot route 127.0.0.0/8 via $router"
}

# wait_ipv6 waits for an IPv6 address beyond link-local on the NIC
# (SLAAC; QEMU's fec0::/64 is site-local, not global).
wait_ipv6() {
	i=0
	while [ "$i" -lt "$wait_dev" ]; do
		ip -6 addr show dev "$net_if" | grep inet6 | grep -qv 'scope link' && return 0
		sleep 1
		i=$((i + 1))
	done
	warn "netprobe: no IPv6 address beyond link-local on $net_if"
}

if [ -n "$netprobe" ] && [ -n "$net_if" ]; then
	n=0
	set -f # [ADDR] is a glob
	for target in $(echo "$netprobe" | tr , ' '); do
		case "$target" in
		127.*) route_loopback ;;
		'['*) wait_ipv6 ;;
		esac
		# Debian's busybox wget has no -T (it crashes on it); a dropped
		# SYN would take the guest's TCP minutes to give up.
		if timeout 15 wget -q -O /tmp/probe.body "http://$target/" 2>/tmp/probe.err; then
			say "VIRTPLANE-NETPROBE target=$target result=reached body=$(oneword </tmp/probe.body)"
		else
			say "VIRTPLANE-NETPROBE target=$target result=blocked error=$(oneword </tmp/probe.err)"
		fi
		n=$((n + 1))
	done
	set +f
	say "VIRTPLANE-NETPROBE-DONE count=$n"
elif [ -n "$netprobe" ]; then
	say "VIRTPLANE-NETPROBE-DONE count=0"
fi

# --- services ------------------------------------------------------------
# virtplane.http answers HTTP on its port (every address) with the
# guest's hostname; httpd has bound the port by the time it returns (it
# daemonizes after).
if [ -n "$http_port" ]; then
	mkdir -p /run/www
	hostname >/run/www/index.html
	if httpd -p "$http_port" -h /run/www; then
		say "VIRTPLANE-HTTP-UP port=$http_port"
	else
		warn "http: httpd on port $http_port failed"
	fi
fi

# virtplane.ga answers libvirt as the QEMU guest agent would, on the
# virtio-serial port named org.qemu.guest_agent.0 (without udev there is
# no /dev/virtio-ports/ link: the port's name is in sysfs).
if [ -n "$ga" ]; then
	load_modules agent
	ga_port=
	i=0
	while [ -z "$ga_port" ] && [ "$i" -lt "$wait_dev" ]; do
		for p in /sys/class/virtio-ports/*; do
			[ "$(cat "$p/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] && ga_port=/dev/${p##*/} && break
		done
		[ -n "$ga_port" ] && [ -c "$ga_port" ] || { ga_port= && sleep 1; }
		i=$((i + 1))
	done
	if [ -n "$ga_port" ]; then
		sh /etc/virtplane/ga.sh "$ga_port" &
		say "VIRTPLANE-GA-UP port=$ga_port"
	else
		warn "ga: no virtio-serial port org.qemu.guest_agent.0"
	fi
fi

# --- timers --------------------------------------------------------------
if [ -n "$poweroff_after" ]; then
	(
		sleep "$poweroff_after"
		/init --virtplane-poweroff timer
	) &
fi
if [ -n "$crash" ]; then
	# Writes to /proc/sysrq-trigger work whatever this mask says, but
	# Debian's default (0x01b6) hides the crash key from the keyboard.
	echo 1 >/proc/sys/kernel/sysrq
	(
		sleep "$crash_after"
		say "VIRTPLANE-GUEST-CRASH uptime=$(uptime_s)"
		# sysrq "c" panics; pvpanic tells QEMU, and libvirt applies on_crash.
		echo c >/proc/sysrq-trigger
	) &
fi

# virtplane.blockwatch prints the guest's disks (virtio and SCSI, /sys/block
# vd* and sd*) as they come and go: each one there at boot and each one
# plugged in later as "VIRTPLANE-BLOCK-ADD dev=vdb serial=data bytes=N",
# each one that leaves as "VIRTPLANE-BLOCK-REMOVE dev=vdb". Looked at every
# 0.5 s, in the background, so a disk plugged in and out in between is
# missed (hotplug tests wait for each step).
blockserial() {
	if [ -r "/sys/block/$1/serial" ]; then
		oneword <"/sys/block/$1/serial"
	elif [ -r "/sys/block/$1/device/vpd_pg80" ]; then
		# The unit serial number page: a 4-byte header, then the serial.
		dd if="/sys/block/$1/device/vpd_pg80" bs=1 skip=4 2>/dev/null | oneword
	fi
}
if [ -n "$blockwatch" ]; then
	(
		known=" "
		while :; do
			now=" "
			for p in /sys/block/vd* /sys/block/sd*; do
				[ -e "$p" ] || continue
				d=${p##*/}
				now="$now$d "
				case "$known" in *" $d "*) continue ;; esac
				s=$(cat "$p/size" 2>/dev/null)
				isnum "$s" || s=0
				say "VIRTPLANE-BLOCK-ADD dev=$d serial=$(blockserial "$d") bytes=$((s * 512))"
			done
			for d in $known; do
				case "$now" in *" $d "*) ;; *) say "VIRTPLANE-BLOCK-REMOVE dev=$d" ;; esac
			done
			known=$now
			sleep 0.5
		done
	) &
fi

# virtplane.tick prints a counter every 100 ms: a live migration must
# not lose or repeat a number (the guest's memory and clock move with it).
if [ -n "$tick" ]; then
	(
		n=0
		while :; do
			n=$((n + 1))
			say "VIRTPLANE-TICK n=$n"
			sleep 0.1
		done
	) &
fi
# virtplane.dirty=MIB rewrites that much memory (a file in the initramfs)
# over and over: a guest whose memory changes faster than a throttled
# migration moves it, which then never converges.
if [ -n "$dirty" ] && [ "$dirty" -gt 0 ]; then
	(
		while :; do
			dd if=/dev/urandom of=/tmp/dirty bs=1M count="$dirty" conv=notrunc 2>/dev/null
		done
	) &
	say "VIRTPLANE-DIRTY mib=$dirty"
fi

# --- console input -------------------------------------------------------
# Each line typed on the serial port is answered with
# "VIRTPLANE-ECHO <line>", so tests can check console input end to end.
# The line is only printed, never run; the loop ends with its input.
(
	while IFS= read -r line; do
		printf 'VIRTPLANE-ECHO %s\n' "$line" >/dev/ttyS0
	done
) </dev/ttyS0 &

# Idle forever; wait also reaps the timers' children.
while :; do
	sleep 3600 &
	wait
done
