#!/usr/bin/env bash
# libibverbs.so.1 exports exactly rdma-core 44's symbols, with their
# versions (tests/abi/libibverbs-44-exports.txt, read off Debian's package).
. "$(dirname "$0")/lib.sh"
lib=${LIB:?path to libibverbs.so.1}
want=$(dirname "$0")/../abi/libibverbs-44-exports.txt

got=$(objdump -T "$lib" | awk '$2~/g|w/ && ($4==".text"||$4==".data"||$4==".bss") {print $(NF-1), $NF}' | sort)
d=$(diff <(sort "$want") <(printf '%s\n' "$got"))
[ -z "$d" ] && ok || bad "exported symbols differ from rdma-core 44:
$d"
soname=$(objdump -p "$lib" | awk '$1=="SONAME"{print $2}')
[ "$soname" = "libibverbs.so.1" ] && ok || bad "SONAME is '$soname'"
# librdmacm.so.1 likewise (tests/abi/librdmacm-44-exports.txt).
cm=${RDMACM_LIB:?path to librdmacm.so.1}
got_cm=$(objdump -T "$cm" | awk '$2~/g|w/ && ($4==".text"||$4==".data"||$4==".bss") {print $(NF-1), $NF}' | sort)
d=$(diff <(sort "$(dirname "$0")/../abi/librdmacm-44-exports.txt") <(printf '%s\n' "$got_cm"))
[ -z "$d" ] && ok || bad "librdmacm's exported symbols differ from rdma-core 44:
$d"
# Every private import of Debian's hardware providers is there.
priv=$(dirname "$0")/../abi/private-imports-mlx5-efa.txt
while read -r ver sym; do
	ver=${ver#(}; ver=${ver%)}
	printf '%s\n' "$got" | grep -qx "$ver $sym" && ok || bad "missing $sym@$ver"
done < "$priv"
finish
