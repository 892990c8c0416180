/* Opens a named uroce device with a PD and a CQ, for the verbs tests. */
#ifndef URO_TEST_FIXTURE_H
#define URO_TEST_FIXTURE_H

#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#define URO_TEST_GIDS 16

struct fixture {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static inline int fixture_open(struct fixture *f, const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	memset(f, 0, sizeof(*f));
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			f->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!f->ctx) {
		fprintf(stderr, "cannot open device %s\n", name);
		return -1;
	}
	f->pd = ibv_alloc_pd(f->ctx);
	f->cq = ibv_create_cq(f->ctx, 64, NULL, NULL, 0);
	return f->pd && f->cq ? 0 : -1;
}

static inline void fixture_close(struct fixture *f)
{
	ibv_destroy_cq(f->cq);
	ibv_dealloc_pd(f->pd);
	ibv_close_device(f->ctx);
}

#endif
