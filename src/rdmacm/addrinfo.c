/* rdma_getaddrinfo(3): getaddrinfo(3) for RDMA endpoints. */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static struct sockaddr *copy_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

static struct rdma_addrinfo *new_result(int family, const struct rdma_addrinfo *hints)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type	  ? hints->ai_qp_type
			: r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD
							  : IBV_QPT_RC;
	return r;
}

static struct rdma_addrinfo *from_addrinfo(const struct addrinfo *ai,
					   const struct rdma_addrinfo *hints, int passive)
{
	struct rdma_addrinfo *r = new_result(ai->ai_family, hints);

	if (!r)
		return NULL;
	if (passive) {
		r->ai_src_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = copy_addr(ai->ai_addr, ai->ai_addrlen);
		r->ai_dst_len = ai->ai_addrlen;
		if (hints && hints->ai_src_addr) {
			r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
			r->ai_src_len = hints->ai_src_len;
		}
	}
	return r;
}

/* No node and no service: the addresses are the hints' own, as libfabric
 * passes them (rdma_getaddrinfo(3): hints may carry ai_src_addr and
 * ai_dst_addr). */
static int from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	const struct sockaddr *any = hints->ai_dst_len ? hints->ai_dst_addr : hints->ai_src_addr;
	struct rdma_addrinfo *r = new_result(any->sa_family, hints);

	if (!r)
		return uro_cm_err(ENOMEM);
	if (hints->ai_src_len) {
		r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
	}
	if (hints->ai_dst_len) {
		r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
		r->ai_dst_len = hints->ai_dst_len;
	}
	if ((hints->ai_src_len && !r->ai_src_addr) || (hints->ai_dst_len && !r->ai_dst_addr)) {
		rdma_freeaddrinfo(r);
		return uro_cm_err(ENOMEM);
	}
	*res = r;
	return 0;
}

static int addresses_in(const struct rdma_addrinfo *hints)
{
	return hints && ((hints->ai_src_len && hints->ai_src_addr) ||
			 (hints->ai_dst_len && hints->ai_dst_addr));
}

URO_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	int passive = hints && (hints->ai_flags & RAI_PASSIVE);
	struct addrinfo h = {.ai_socktype = SOCK_STREAM}, *list;
	struct rdma_addrinfo **tail = res;
	int rc;

	if (!res)
		return uro_cm_err(EINVAL);
	if (!node && !service)
		return addresses_in(hints) ? from_hints(hints, res) : uro_cm_err(EINVAL);
	if (hints) {
		h.ai_family = hints->ai_family;
		h.ai_flags = (passive ? AI_PASSIVE : 0) |
			     (hints->ai_flags & RAI_NUMERICHOST ? AI_NUMERICHOST : 0);
	}
	rc = getaddrinfo(node, service, &h, &list);
	if (rc)
		return uro_cm_err(rc == EAI_SYSTEM ? errno : rc == EAI_MEMORY ? ENOMEM : ENODEV);
	*res = NULL;
	for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
		*tail = from_addrinfo(ai, hints, passive);
		if (!*tail)
			break;
		tail = &(*tail)->ai_next;
	}
	freeaddrinfo(list);
	return *res ? 0 : uro_cm_err(ENOMEM);
}

URO_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
