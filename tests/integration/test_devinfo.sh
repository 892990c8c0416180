#!/usr/bin/env bash
# Debian's ibv_devices and ibv_devinfo, unmodified, under `uroce run`.
. "$(dirname "$0")/lib.sh"

out=$(timeout $T "$UROCE" run ibv_devices 2>&1); st=$?
expect_status 0 $st "ibv_devices"
expect_match "$out" '^ +uroce0[[:space:]]+[0-9a-f]{16}$' "ibv_devices lists uroce0 with its GUID"

out=$(timeout $T "$UROCE" run ibv_devinfo 2>&1); st=$?
expect_status 0 $st "ibv_devinfo"
expect_match "$out" '^hca_id:	uroce0$' "hca_id"
expect_match "$out" 'transport:			InfiniBand \(0\)' "transport"
expect_match "$out" 'fw_ver:				[0-9]+\.[0-9]+\.[0-9]+' "fw_ver"
expect_match "$out" 'node_guid:			[0-9a-f]{4}(:[0-9a-f]{4}){3}' "node_guid"
expect_match "$out" 'sys_image_guid:			[0-9a-f]{4}(:[0-9a-f]{4}){3}' "sys_image_guid"
expect_match "$out" 'vendor_id:			0x[0-9a-f]{4}' "vendor_id"
expect_match "$out" 'vendor_part_id:			[0-9]+' "vendor_part_id"
expect_match "$out" 'hw_ver:				0x' "hw_ver"
expect_match "$out" 'phys_port_cnt:			1$' "phys_port_cnt"
expect_match "$out" 'port:	1$' "port 1"
expect_match "$out" 'state:			PORT_ACTIVE \(4\)' "port state"
expect_match "$out" 'max_mtu:		4096 \(5\)' "max_mtu"
lo_mtu=$(cat /sys/class/net/lo/mtu)
[ "$lo_mtu" -ge 4176 ] && expect_match "$out" 'active_mtu:		4096 \(5\)' "active_mtu from lo's MTU"
expect_match "$out" 'link_layer:		Ethernet' "link_layer"

out=$(timeout $T "$UROCE" run ibv_devinfo -v 2>&1); st=$?
expect_status 0 $st "ibv_devinfo -v"
for cap in max_mr_size page_size_cap max_qp max_qp_wr device_cap_flags max_sge max_cq max_cqe \
	max_mr max_pd max_qp_rd_atom max_qp_init_rd_atom atomic_cap max_srq max_srq_wr \
	max_pkeys local_ca_ack_delay max_msg_sz gid_tbl_len pkey_tbl_len active_width \
	active_speed phys_state; do
	expect_match "$out" "^	+$cap:" "ibv_devinfo -v prints $cap"
done
expect_match "$out" 'max_qp:				4096$' "max_qp is the QPN index space"
expect_match "$out" 'phys_state:		LINK_UP \(5\)' "phys_state"
expect_match "$out" 'GID\[  0\]:		::ffff:127\.0\.0\.1, RoCE v2' "GID 0 is 127.0.0.1, RoCE v2"
expect_match "$out" 'GID\[  1\]:		::1, RoCE v2' "GID 1 is ::1, RoCE v2"
expect_match "$out" 'atomic_cap:			ATOMIC_HCA \(1\)' "atomics are atomic across the device"
expect_match "$out" '^					RC_RNR_NAK_GEN$' "RNR NAKs are generated"
expect_match "$out" '^					ODP_SUPPORT_IMPLICIT$' "implicit ODP"
# Only capabilities uroce provides are claimed.
expect_match "$out" '^					MEM_WINDOW_TYPE_2B$' "memory windows, type 2B"
expect_match "$out" '^					XRC$' "XRC"
if printf '%s\n' "$out" | grep -Eq 'AUTO_PATH_MIG|MEM_MGT_EXTENSIONS'; then
	bad "ibv_devinfo -v claims a capability uroce does not have"
else ok; fi

out=$(timeout $T "$UROCE" run ibv_devinfo -d nosuch 2>&1); st=$?
expect_status 255 $st "ibv_devinfo -d nosuch"
expect_match "$out" "IB device 'nosuch' wasn't found" "unknown device"

# An IB-type device: LID, IB link layer, GID fe80::/64 + GUID of type IB.
timeout $T "$UROCE" link add ibx netdev lo type ib >/dev/null 2>&1
out=$(timeout $T "$UROCE" run ibv_devinfo -v -d ibx 2>&1); st=$?
expect_status 0 $st "ibv_devinfo -d ibx"
expect_match "$out" 'port_lid:		1$' "IB port has LID 1"
expect_match "$out" 'link_layer:		InfiniBand' "IB link layer"
expect_match "$out" 'GID\[  0\]:		fe80:0000:0000:0000:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}' "IB GID 0"
finish
