/* A link deleted, or changed, while processes use it: each of them hears
 * IBV_EVENT_DEVICE_FATAL on its context's async fd, as a Soft-RoCE device's
 * users do when `rdma link delete` removes it. The command that changes the
 * configuration tells them itself, through each process's event pipe, so
 * no process has to watch the file. A name is not enough to find them: the
 * same name may be a link of another configuration file, in use by
 * programs started with another UROCE_CONFIG. */
#include "link_gone.h"

#include <string.h>

#include "peer.h"
#include "registry.h"
#include "segment_ops.h"

unsigned uro_link_gone_notify(const char *config_path, const struct uro_link *link)
{
	struct uro_slot_owner owners[URO_MAX_SLOTS];
	uint64_t id = uro_link_id(config_path, link);
	unsigned told = 0, n = uro_registry_owners_of(NULL, id, owners, URO_MAX_SLOTS);

	for (unsigned i = 0; i < n; i++) {
		struct uro_peer p;

		/* Another user's process cannot be reached, as for any request:
		 * it learns of the change when it next opens the device. */
		memset(&p, 0, sizeof(p));
		if (uro_peer_observe(&p, NULL, owners[i].slot))
			continue;
		uro_raise_event(&p, IBV_EVENT_DEVICE_FATAL, 0, 0, 0);
		uro_peer_detach(&p);
		told++;
	}
	return told;
}
