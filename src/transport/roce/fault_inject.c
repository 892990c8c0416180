/* Where UROCE_FAULTS meets the packets (faults.h): every packet the
 * endpoint sends passes here when faults are set, and nothing else does:
 * without them uro_wire_send pays one branch. A packet held back waits,
 * to be sent by the next send or progress pass once due: a delayed one in
 * a FIFO, a reordered one until the next packet went. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "wire.h"

#define DELAYED_MAX   128
#define REORDERED_MAX 16
/* A reordered packet goes after the next packet sent, or after this. */
#define REORDER_MAX_NS (1000 * 1000ull)

struct held {
	uint64_t due; /* 0: a free reordered slot */
	struct uro_wire_dest to;
	size_t len;
	uint8_t data[URO_WIRE_BUF - URO_WIRE_HEAD];
};

struct uro_wire_faults {
	struct uro_fault_spec spec;
	pthread_mutex_t lock; /* senders of every thread come through here */
	uint64_t rng;
	uint64_t first_due;  /* the earliest due among held, 0 none */
	uint64_t first_sent; /* when the first packet went: stalls count from it */
	/* Delayed packets leave in the order they came, as from a link's
	 * queue: the jitter varies each one's wait, never their order (that
	 * is the reorder fault's; a netem-like jitter that reordered every
	 * burst would leave RC little but timeouts, IBTA 9.7.5.1.2). */
	struct held delayed[DELAYED_MAX];
	unsigned head, count;
	struct held reordered[REORDERED_MAX];
};

int uro_wire_faults_open(const char *spec, const char *dev, struct uro_wire_faults **out)
{
	struct uro_wire_faults *f;
	struct uro_fault_spec s;
	char err[160];

	*out = NULL;
	if (uro_faults_parse(spec, &s, err, sizeof(err))) {
		uro_warn("UROCE_FAULTS: %s", err);
		return EINVAL;
	}
	/* Scoped to another device: this one's context runs clean. */
	if (s.dev[0] && strcmp(s.dev, dev))
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return ENOMEM;
	f->spec = s;
	f->rng = s.seed;
	pthread_mutex_init(&f->lock, NULL);
	*out = f;
	return 0;
}

void uro_wire_faults_free(struct uro_wire_faults *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* A packet held back and due during a stall is lost with the others. */
static void send_held(struct uro_wire_endpoint *w, const struct held *h, uint64_t now)
{
	struct uro_wire_faults *f = w->faults;

	if (uro_faults_stalled(&f->spec, now - f->first_sent))
		w->n->injected_stall++;
	else
		uro_wire_transmit(w, &h->to, h->data, h->len);
}

static void store(struct held *h, const struct uro_wire_dest *to, const uint8_t *data, size_t len,
		  uint64_t due)
{
	h->due = due;
	h->to = *to;
	h->len = len;
	memcpy(h->data, data, len);
}

/* The reordered packets go: a packet went (after_send), or they are due. */
static void release_reordered(struct uro_wire_endpoint *w, uint64_t now, int after_send)
{
	for (int i = 0; i < REORDERED_MAX; i++) {
		struct held *h = &w->faults->reordered[i];

		if (h->due && (after_send || h->due <= now)) {
			send_held(w, h, now);
			h->due = 0;
		}
	}
}

static void send_oldest_delayed(struct uro_wire_endpoint *w, uint64_t now)
{
	struct uro_wire_faults *f = w->faults;

	send_held(w, &f->delayed[f->head], now);
	f->head = (f->head + 1) % DELAYED_MAX;
	f->count--;
	release_reordered(w, now, 1);
}

static uint64_t earliest_due(const struct uro_wire_faults *f)
{
	uint64_t first = f->count ? f->delayed[f->head].due : 0;

	for (int i = 0; i < REORDERED_MAX; i++) {
		uint64_t d = f->reordered[i].due;

		if (d && (!first || d < first))
			first = d;
	}
	return first;
}

/* Sends what is due (and, after a packet went, what waited for one);
 * returns the earliest due left. Under f->lock. */
static uint64_t release(struct uro_wire_endpoint *w, uint64_t now, int after_send)
{
	struct uro_wire_faults *f = w->faults;
	uint64_t first;

	/* Nothing held, or nothing due and no packet just went: nothing to
	 * scan on every send. */
	if (!f->first_due || (!after_send && f->first_due > now))
		return f->first_due;
	release_reordered(w, now, after_send);
	while (f->count && f->delayed[f->head].due <= now)
		send_oldest_delayed(w, now);
	first = earliest_due(f);
	__atomic_store_n(&f->first_due, first, __ATOMIC_RELAXED);
	return first;
}

static void note_due(struct uro_wire_faults *f, uint64_t due)
{
	if (!f->first_due || due < f->first_due)
		__atomic_store_n(&f->first_due, due, __ATOMIC_RELAXED);
}

/* Holds the packet until the next one went; -1 when every slot is taken. */
static int hold_reordered(struct uro_wire_faults *f, const struct uro_wire_dest *to,
			  const uint8_t *data, size_t len, uint64_t due)
{
	for (int i = 0; i < REORDERED_MAX; i++) {
		if (f->reordered[i].due)
			continue;
		store(&f->reordered[i], to, data, len, due);
		note_due(f, due);
		return 0;
	}
	return -1;
}

/* Holds the packet until due, behind every packet delayed before it; a
 * full queue sends its oldest early rather than break the order. */
static void hold_delayed(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
			 const uint8_t *data, size_t len, uint64_t due, uint64_t now)
{
	struct uro_wire_faults *f = w->faults;

	uint64_t youngest;

	if (f->count == DELAYED_MAX)
		send_oldest_delayed(w, now);
	youngest = f->count ? f->delayed[(f->head + f->count - 1) % DELAYED_MAX].due : 0;
	store(&f->delayed[(f->head + f->count) % DELAYED_MAX], to, data, len,
	      due > youngest ? due : youngest);
	f->count++;
	note_due(f, f->delayed[f->head].due);
}

static uint64_t delay_of(struct uro_wire_faults *f)
{
	const struct uro_fault_spec *s = &f->spec;

	if (!s->jitter_ns)
		return s->delay_ns;
	return s->delay_ns - s->jitter_ns + uro_faults_below(&f->rng, 2 * s->jitter_ns + 1);
}

/* The faults a packet in scope meets: 1 when they took it (lost, or held
 * back to go later), 0 when it is to be sent now. */
static int inject(struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *data,
		  size_t len, uint64_t now)
{
	struct uro_wire_faults *f = w->faults;
	const struct uro_fault_spec *s = &f->spec;
	uint64_t d;

	if (!f->first_sent)
		f->first_sent = now;
	if (uro_faults_stalled(s, now - f->first_sent)) {
		w->n->injected_stall++;
		return 1;
	}
	if (uro_faults_hit(&f->rng, s->loss)) {
		w->n->injected_loss++;
		return 1;
	}
	if (uro_faults_hit(&f->rng, s->corrupt)) {
		data[len - 1] ^= 0xff; /* the ICRC's last byte */
		w->n->injected_corrupt++;
	}
	if (uro_faults_hit(&f->rng, s->dup)) {
		uro_wire_transmit(w, to, data, len);
		w->n->injected_dup++;
	}
	if (uro_faults_hit(&f->rng, s->reorder) &&
	    !hold_reordered(f, to, data, len, now + REORDER_MAX_NS + delay_of(f))) {
		w->n->injected_reorder++;
		return 1;
	}
	d = delay_of(f);
	if (!d)
		return 0;
	hold_delayed(w, to, data, len, now + d, now);
	w->n->injected_delay++;
	return 1;
}

void uro_wire_faults_send(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
			  uint8_t *data, size_t len)
{
	struct uro_wire_faults *f = w->faults;
	uint64_t now = uro_now_ns();

	pthread_mutex_lock(&f->lock);
	release(w, now, 0);
	/* data is the BTH: the opcode, then the destination QP at 5..7. A
	 * packet out of the spec's scope draws nothing. */
	if (!uro_faults_scoped(&f->spec, data[0],
			       (uint32_t)data[5] << 16 | data[6] << 8 | data[7]) ||
	    !inject(w, to, data, len, now)) {
		uro_wire_transmit(w, to, data, len);
		release(w, now, 1);
	}
	pthread_mutex_unlock(&f->lock);
}

uint64_t uro_wire_faults_flush(struct uro_wire_endpoint *w)
{
	struct uro_wire_faults *f = w->faults;
	uint64_t now, first;

	if (!f || !__atomic_load_n(&f->first_due, __ATOMIC_RELAXED))
		return 0;
	now = uro_now_ns();
	pthread_mutex_lock(&f->lock);
	first = release(w, now, 0);
	pthread_mutex_unlock(&f->lock);
	return first ? (first > now ? first - now : 1) : 0;
}

int uro_wire_faults_rnr(struct uro_wire_endpoint *w)
{
	struct uro_wire_faults *f = w->faults;
	int hit;

	if (!f || !f->spec.rnr)
		return 0;
	pthread_mutex_lock(&f->lock);
	hit = uro_faults_hit(&f->rng, f->spec.rnr);
	pthread_mutex_unlock(&f->lock);
	if (hit)
		w->n->injected_rnr++;
	return hit;
}
