/* The other processes of this host a context reaches (docs/design.md, a
 * process is a function of the device): a QPN names a slot, the slot's
 * owner is attached on first use and kept, and looked up again when the
 * slot may have changed hands. */
#include <errno.h>
#include <stdlib.h>

#include "objects.h"
#include "registry.h"

static unsigned slot_of(uint32_t qpn, int *err)
{
	unsigned slot = (qpn & 0xffffff) >> URO_QPN_INDEX_BITS;

	*err = slot == 0 || slot >= URO_MAX_SLOTS ? EINVAL : 0;
	return *err ? 0 : slot;
}

static int usable(struct uro_peer *p)
{
	return p && !__atomic_load_n(&p->dead, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&p->hdr->closed, __ATOMIC_ACQUIRE) && uro_peer_alive(p);
}

/* Attaches the slot's owner, or replaces the cached one in place (a peer
 * struct, once published, lives as long as the context: other threads may
 * hold it). Called with peers_lock held. */
static struct uro_peer *attach(struct uro_context *ctx, unsigned slot, int *err)
{
	struct uro_peer *p = ctx->peers[slot];
	int rc;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			*err = ENOMEM;
			return NULL;
		}
	}
	rc = uro_peer_attach(p, NULL, slot);
	if (rc)
		__atomic_store_n(&p->dead, 1, __ATOMIC_RELEASE);
	if (!ctx->peers[slot]) {
		if (!p->base) { /* never mapped: nothing to keep */
			free(p);
			*err = -rc;
			return NULL;
		}
		__atomic_store_n(&ctx->peers[slot], p, __ATOMIC_RELEASE);
	}
	*err = -rc;
	return rc ? NULL : p;
}

struct uro_peer *uro_peer_of(struct uro_context *ctx, uint32_t qpn, int *err)
{
	unsigned slot = slot_of(qpn, err);
	struct uro_peer *p;

	if (!slot)
		return NULL;
	p = __atomic_load_n(&ctx->peers[slot], __ATOMIC_ACQUIRE);
	if (usable(p))
		return p;
	pthread_mutex_lock(&ctx->peers_lock);
	p = ctx->peers[slot];
	p = usable(p) ? p : attach(ctx, slot, err);
	pthread_mutex_unlock(&ctx->peers_lock);
	return p;
}

/* Whether the registry names another process (or none) for p's slot. */
static int owner_changed(const struct uro_peer *p, unsigned slot)
{
	struct uro_slot_record rec;

	return uro_registry_lookup(NULL, slot, &rec) != 1 || rec.pid != p->pid;
}

struct uro_peer *uro_peer_refresh(struct uro_context *ctx, uint32_t qpn, int *err)
{
	unsigned slot = slot_of(qpn, err);
	struct uro_peer *p;

	if (!slot)
		return NULL;
	pthread_mutex_lock(&ctx->peers_lock);
	p = ctx->peers[slot];
	if (!p || (!p->self && (!usable(p) || owner_changed(p, slot))))
		p = attach(ctx, slot, err);
	pthread_mutex_unlock(&ctx->peers_lock);
	return p;
}
