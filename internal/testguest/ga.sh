#!/bin/sh
# The test guest's QEMU guest agent stand-in (busybox sh), started by
# /init with virtplane.ga as "sh /etc/virtplane/ga.sh PORT"; "ga.sh -"
# serves stdin and stdout instead (the tests'). See README.md.

export PATH=/bin
set -f

# A stand-in for the QEMU guest agent (qemu-ga) on its virtio-serial port,
# enough for libvirt: guest-sync and guest-sync-delimited (the id echoed),
# guest-ping, guest-info, guest-network-get-interfaces (qemu-ga's JSON
# shape, from `ip addr`), guest-fsfreeze-freeze, -thaw and -status (a
# sync and a console marker line: the guest's root is a tmpfs with
# nothing to freeze, so the state is only recorded), and an error object
# for anything else. One request per line; libvirt may put a 0xFF sync
# byte before one. Markers go to stderr: the console in the guest, and
# not the replies under "ga.sh -".

# ga_interfaces prints the guest's interfaces as qemu-ga's
# guest-network-get-interfaces returns them.
ga_interfaces() {
	ip addr show | awk '
	function flush() {
		if (name == "") return
		printf "%s{\"name\": \"%s\", \"hardware-address\": \"%s\", \"ip-addresses\": [%s]}", sep, name, hw, addrs
		sep = ", "
	}
	BEGIN { printf "[" }
	/^[0-9]+: / {
		flush()
		name = $2; sub(/:$/, "", name); sub(/@.*/, "", name)
		hw = "00:00:00:00:00:00"; addrs = ""; asep = ""
		next
	}
	$1 ~ /^link\// { hw = $2; next }
	$1 == "inet" || $1 == "inet6" {
		split($2, a, "/")
		addrs = addrs asep sprintf("{\"ip-address-type\": \"%s\", \"ip-address\": \"%s\", \"prefix\": %d}", $1 == "inet" ? "ipv4" : "ipv6", a[1], a[2])
		asep = ", "
	}
	END { flush(); printf "]" }'
}

# ga_serve answers requests on the port $1 until the guest powers off,
# or on stdin and stdout until stdin ends when $1 is "-" (the tests').
# Requests are read from fd 3, replies written to fd 4.
ga_serve() {
	if [ "$1" = - ]; then
		exec 3<&0 4>&1
	else
		exec 3<>"$1" 4>&3
	fi
	frozen=0
	while :; do
		if ! IFS= read -r line <&3; then
			[ "$1" != - ] || exit 0
			# While no host side is connected (libvirt connects once
			# the guest opened the port) a read returns at once: poll.
			sleep 0.5
			continue
		fi
		case "$line" in
		*'{'*) line="{${line#*\{}" ;; # drops a 0xFF sync byte or noise
		*) continue ;;
		esac
		cmd=
		case "$line" in
		*'"execute"'*)
			cmd=${line#*\"execute\"}
			cmd=${cmd#*\"}
			cmd=${cmd%%\"*}
			;;
		esac
		id=0
		case "$line" in
		*'"id"'*)
			id=${line#*\"id\"}
			id=${id#*:}
			while [ "${id# }" != "$id" ]; do id=${id# }; done
			id=${id%%[!0-9-]*}
			[ -n "$id" ] || id=0
			;;
		esac
		case "$cmd" in
		guest-sync-delimited)
			# The reply starts with 0xFF, as qemu-ga's does.
			printf '\377{"return": %s}\n' "$id" >&4
			;;
		guest-sync) printf '{"return": %s}\n' "$id" >&4 ;;
		guest-ping) printf '{"return": {}}\n' >&4 ;;
		guest-info)
			printf '{"return": {"version": "virtplane-test-guest", "supported_commands": [' >&4
			sep=
			for c in guest-sync guest-sync-delimited guest-ping guest-info guest-network-get-interfaces \
				guest-fsfreeze-freeze guest-fsfreeze-thaw guest-fsfreeze-status; do
				printf '%s{"enabled": true, "name": "%s", "success-response": true}' "$sep" "$c" >&4
				sep=', '
			done
			printf ']}}\n' >&4
			;;
		guest-network-get-interfaces) printf '{"return": %s}\n' "$(ga_interfaces)" >&4 ;;
		guest-fsfreeze-freeze)
			sync
			frozen=1
			echo "VIRTPLANE-GA-FSFREEZE state=frozen" >&2
			printf '{"return": 1}\n' >&4
			;;
		guest-fsfreeze-thaw)
			# The number of file systems thawed, as qemu-ga's.
			n=$frozen
			frozen=0
			echo "VIRTPLANE-GA-FSFREEZE state=thawed" >&2
			printf '{"return": %s}\n' "$n" >&4
			;;
		guest-fsfreeze-status)
			st=thawed
			[ "$frozen" = 0 ] || st=frozen
			printf '{"return": "%s"}\n' "$st" >&4
			;;
		*) printf '{"error": {"class": "CommandNotFound", "desc": "The command %s has not been found"}}\n' "$cmd" >&4 ;;
		esac
	done
}

ga_serve "$1"
