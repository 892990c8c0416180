/* Connecting: rdma_listen(3), rdma_connect(3), rdma_accept(3),
 * rdma_reject(3), rdma_disconnect(3), rdma_establish(3). The messages go
 * over the CM's TCP connection (wire.c); replies come back as events
 * through the CM thread (cm_thread.c). */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm_mad.h"

static void my_side(struct uro_cm_id *cm, struct uro_cm_peer *me)
{
	struct ibv_port_attr port;

	memset(me, 0, sizeof(*me));
	me->qpn = cm->id.qp ? cm->id.qp->qp_num : cm->param.qp_num;
	me->psn = cm->psn;
	me->qkey = URO_UDP_QKEY;
	me->responder_resources = cm->param.responder_resources;
	me->initiator_depth = cm->param.initiator_depth;
	me->retry_count = cm->param.retry_count;
	me->rnr_retry = cm->param.rnr_retry_count;
	me->srq = cm->id.srq != NULL || cm->param.srq;
	me->gid = cm->path.sgid;
	if (cm->id.verbs && ibv_query_port(cm->id.verbs, 1, &port) == 0)
		me->lid = port.lid;
}

/* A depth the program asked for: RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH
 * (0xff) ask for what the peer's REQ asked for (rdma_accept) or for the
 * device's maximum (rdma_connect), no more than the maximum; more than the
 * maximum is EINVAL. */
static int depth(uint8_t *want, int max, uint8_t asked)
{
	if (*want == 0xff)
		*want = (uint8_t)(asked < max ? asked : max);
	return *want > max ? EINVAL : 0;
}

/* The program's connection parameters as the CM uses them
 * (rdma_connect(3), rdma_accept(3)); req is the REQ an accept answers.
 * Without parameters, librdmacm asks for the most of each depth and 7
 * retries of each kind (rdma-core's cma.c: rdma_connect, rdma_accept,
 * ucma_copy_conn_param_to_kern): an rping server that accepts with NULL
 * offers the READs its client's REQ asked for. The retry counts are 3-bit
 * fields on the wire (IBTA 12.6.5): larger ones are clamped to 7, as the
 * kernel CM clamps them. Returns 0 or an errno. */
static int take_param(struct uro_cm_id *cm, const struct rdma_conn_param *param,
		      const struct uro_cm_peer *req)
{
	static const struct rdma_conn_param none = {.responder_resources = RDMA_MAX_RESP_RES,
						    .initiator_depth = RDMA_MAX_INIT_DEPTH,
						    .retry_count = 7,
						    .rnr_retry_count = 7};
	struct ibv_device_attr d;

	cm->param = param ? *param : none;
	if (cm->param.retry_count > 7)
		cm->param.retry_count = 7;
	if (cm->param.rnr_retry_count > 7)
		cm->param.rnr_retry_count = 7;
	if (cm->id.qp_type == IBV_QPT_UD)
		return 0;
	if (!cm->id.verbs || ibv_query_device(cm->id.verbs, &d))
		return ENODEV;
	/* The REQ's initiator depth is the reads this side answers at once,
	 * its responder resources the reads it may have out (cm.c's
	 * cm_format_req_event). */
	if (depth(&cm->param.responder_resources, d.max_qp_rd_atom,
		  req ? req->initiator_depth : 0xff) ||
	    depth(&cm->param.initiator_depth, d.max_qp_init_rd_atom,
		  req ? req->responder_resources : 0xff))
		return EINVAL;
	return 0;
}

/* The CM connection is done with: stop reading it and close it (called
 * with the CM lock held). */
static void hang_up(struct uro_cm_id *cm)
{
	uro_cm_unwatch(cm);
	if (cm->sock >= 0)
		close(cm->sock);
	cm->sock = -1;
}

URO_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct uro_cm_id *cm = to_cm(id);
	struct sockaddr_in any = {.sin_family = AF_INET};
	int rc;

	if (cm->state != CM_IDLE)
		return uro_cm_err(EINVAL);
	if (cm->sock < 0 && rdma_bind_addr(id, (struct sockaddr *)&any))
		return -1;
	if (listen(cm->sock, backlog > 0 ? backlog : URO_CM_BACKLOG))
		return -1;
	uro_cm_lock();
	rc = uro_cm_mad_listen(cm);
	if (!rc && uro_cm_watch(cm))
		rc = ENOMEM;
	if (!rc)
		cm->state = CM_LISTEN;
	uro_cm_unlock();
	return rc ? uro_cm_err(rc) : 0;
}

/* The active side's TCP connection to the listener; a refusal is what a
 * CM reports for a service nobody listens on: REJECTED. */
static int listening(int s)
{
	int on = 0;
	socklen_t len = sizeof(on);

	return !getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) && on;
}

static int dial(struct uro_cm_id *cm)
{
	const struct sockaddr *dst = &cm->id.route.addr.dst_addr;
	struct timeval tv = {.tv_sec = 5};
	int one = 1;

	/* An id bound with rdma_bind_addr listens (address.c): it connects
	 * from a new socket on the same address. */
	if (cm->sock >= 0 && listening(cm->sock)) {
		struct sockaddr_storage src = cm->id.route.addr.src_storage;

		close(cm->sock);
		cm->sock = -1;
		if (uro_cm_bind_socket(cm, (struct sockaddr *)&src))
			return -1;
	}
	if (cm->sock < 0) {
		cm->sock = socket(dst->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (cm->sock < 0)
			return -1;
		setsockopt(cm->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	setsockopt(cm->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return connect(cm->sock, dst, sa_len(dst));
}

URO_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct uro_cm_id *cm = to_cm(id);
	int ud = id->qp_type == IBV_QPT_UD;
	uint8_t limit = ud ? URO_PDATA_SIDR_REQ : URO_PDATA_REQ;
	struct uro_cm_peer me;
	int rc;

	if (cm->state != CM_ROUTE_RESOLVED || (param && param->private_data_len > limit) ||
	    (!ud && !id->qp && !param))
		return uro_cm_err(EINVAL);
	if ((rc = take_param(cm, param, NULL)))
		return uro_cm_err(rc);
	if (!id->qp && param)
		cm->qpn = param->qp_num; /* the program's own QP */
	my_side(cm, &me);
	uro_cm_lock();
	uro_cm_mad_unlisten(cm);	 /* a bound id that connects serves nobody */
	if (uro_cm_peer_is_remote(cm)) { /* another host: the IB CM's MADs */
		rc = uro_cm_mad_connect(cm, &me, param ? param->private_data : NULL,
					param ? param->private_data_len : 0);
		uro_cm_unlock();
		return rc ? uro_cm_err(rc) : uro_cm_wait(cm, RDMA_CM_EVENT_ESTABLISHED);
	}
	if (dial(cm)) {
		int err = errno;

		uro_cm_unlock();
		cm->state = CM_DISCONNECTED;
		if (err == ECONNREFUSED)
			uro_cm_post(cm, ud ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_REJECTED,
				    ud ? -ECONNREFUSED : URO_REJ_INVALID_SERVICE_ID, NULL, 0, NULL);
		else
			uro_cm_post(cm, RDMA_CM_EVENT_UNREACHABLE, -err, NULL, 0, NULL);
		return uro_cm_wait(cm, RDMA_CM_EVENT_ESTABLISHED);
	}
	rc = uro_cm_send(cm->sock, ud ? MSG_SIDR_REQ : MSG_REQ, &me, 0,
			 param ? param->private_data : NULL, param ? param->private_data_len : 0);
	if (!rc) {
		cm->state = CM_CONNECTING;
		rc = uro_cm_watch(cm);
		if (!rc)
			uro_cm_expect_answer(cm); /* the REP, or an MRA */
	}
	uro_cm_unlock();
	if (rc)
		return uro_cm_err(ECONNRESET);
	return uro_cm_wait(cm, RDMA_CM_EVENT_ESTABLISHED);
}

URO_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	struct uro_cm_id *cm = to_cm(id);
	int ud = id->qp_type == IBV_QPT_UD;
	uint8_t limit = ud ? URO_PDATA_SIDR_REP : URO_PDATA_REP;
	struct uro_cm_peer me;
	int rc;

	if (cm->state != CM_REQ_RCVD || (param && param->private_data_len > limit) ||
	    (!id->qp && !param))
		return uro_cm_err(EINVAL);
	if ((rc = take_param(cm, param, &cm->peer)))
		return uro_cm_err(rc);
	if (!id->qp && param)
		cm->qpn = param->qp_num; /* the program's own QP */
	if (!ud && id->qp && uro_cm_qp_to_rtr_rts(cm))
		return -1;
	my_side(cm, &me);
	uro_cm_lock();
	cm->state = ud ? CM_CONNECTED : CM_ACCEPTING;
	rc = uro_cm_tell(cm, ud ? MSG_SIDR_REP : MSG_REP, &me, 0,
			 param ? param->private_data : NULL, param ? param->private_data_len : 0);
	if (ud)
		hang_up(cm); /* SIDR is one exchange: the datagram QP stays as it is */
	else
		uro_cm_expect_answer(cm); /* the RTU */
	uro_cm_unlock();
	if (rc)
		return uro_cm_err(ECONNRESET);
	return ud ? 0 : uro_cm_wait(cm, RDMA_CM_EVENT_ESTABLISHED);
}

URO_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			   uint8_t private_data_len)
{
	struct uro_cm_id *cm = to_cm(id);
	int ud = id->qp_type == IBV_QPT_UD;
	int rc;

	if (cm->state != CM_REQ_RCVD ||
	    private_data_len > (ud ? URO_PDATA_SIDR_REP : URO_PDATA_REJ))
		return uro_cm_err(EINVAL);
	uro_cm_lock();
	rc = uro_cm_tell(cm, ud ? MSG_SIDR_REP : MSG_REJ, NULL, URO_REJ_CONSUMER_DEFINED,
			 private_data, private_data_len);
	cm->state = CM_DISCONNECTED;
	hang_up(cm);
	uro_cm_unlock();
	return rc ? uro_cm_err(ECONNRESET) : 0;
}

URO_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			       uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

/* Both sides hear DISCONNECTED: the other when our DREQ arrives, we when
 * its DREP does (or its connection drops). */
URO_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct uro_cm_id *cm = to_cm(id);
	int rc = 0;

	uro_cm_lock();
	if (cm->state == CM_CONNECTED || cm->state == CM_ACCEPTING || cm->state == CM_CONNECTING) {
		if (id->qp)
			uro_cm_qp_to_error(cm);
		if (!uro_cm_tell(cm, MSG_DREQ, NULL, 0, NULL, 0) && cm->mad)
			uro_cm_expect_answer(cm); /* the DREP, resent for until then */
		/* Still CONNECTED: the DREP (or the hangup) delivers our event. */
		cm->state = CM_CONNECTED;
	} else if (cm->state != CM_DISCONNECTED) {
		rc = uro_cm_err(EINVAL);
	}
	uro_cm_unlock();
	return rc;
}

URO_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct uro_cm_id *cm = to_cm(id);
	int rc;

	if (cm->state != CM_CONNECTING)
		return uro_cm_err(EINVAL);
	uro_cm_lock();
	rc = uro_cm_tell(cm, MSG_RTU, NULL, 0, NULL, 0);
	cm->state = CM_CONNECTED;
	uro_cm_unlock();
	return rc ? uro_cm_err(ECONNRESET) : 0;
}

/* rdma_notify(3) tells the CM that traffic arrived before ESTABLISHED; a
 * uroce connection is established before any can. */
URO_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)id;
	(void)event;
	return 0;
}

/* Enhanced Connection Establishment: uroce has no options to negotiate. */
URO_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	(void)ece;
	return uro_cm_err(EOPNOTSUPP);
}

URO_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id;
	(void)ece;
	return uro_cm_err(EOPNOTSUPP);
}
