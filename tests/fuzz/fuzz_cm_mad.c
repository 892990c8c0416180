/* libFuzzer target for the CM's MAD parser (src/rdmacm/mad.c) and QP 1's
 * routing (src/core/mad_route.c): any 256 bytes a host's QP 1 may receive.
 * Whatever they are, nothing reads or writes outside its buffer; a MAD the
 * parser accepts is a known message whose private data fits what the
 * program sees, and it builds back to bytes that parse the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mad_codec.h"
#include "mad_route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mad[URO_MAD_LEN] = {0}, again[URO_MAD_LEN], out[URO_MAD_LEN];
	struct uro_cm_mad m, n;
	struct sockaddr_un a[2];
	socklen_t len[2];

	memcpy(mad, data, size < sizeof(mad) ? size : sizeof(mad));
	if (uro_mad_route(NULL, mad, a, len) > 2)
		abort();
	uro_mad_unheard(mad, out);
	if (uro_cm_mad_parse(mad, &m))
		return 0;
	if (m.type < MSG_REQ || m.type > MSG_MRA || m.pdata_len > URO_PDATA_MAX)
		abort();
	uro_cm_mad_build(&m, again);
	if (uro_cm_mad_parse(again, &n) || n.type != m.type || n.local_id != m.local_id ||
	    n.remote_id != m.remote_id || n.peer.qpn != m.peer.qpn || n.status != m.status ||
	    memcmp(n.pdata, m.pdata, m.pdata_len))
		abort();
	return 0;
}
