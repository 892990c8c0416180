#include "pcap_trace.h"

#include "icrc.h"
#include "packet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The classic pcap format: microsecond timestamps, raw IP packets
 * (LINKTYPE_RAW), as tcpdump writes them. */
#define PCAP_MAGIC   0xa1b2c3d4u
#define LINKTYPE_RAW 101
#define SNAP_MAX     65535u

struct uro_pcap {
	int fd;
	uint32_t snap; /* payload bytes kept of each packet; 0: all */
};

struct pcap_file_header {
	uint32_t magic;
	uint16_t major, minor;
	int32_t thiszone;
	uint32_t sigfigs, snaplen, linktype;
};

struct pcap_record_header {
	uint32_t sec, usec, incl_len, orig_len;
};

int uro_pcap_snap_parse(const char *s, uint32_t *snap, char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > SNAP_MAX) {
		snprintf(err, errlen, "snap length '%s': payload bytes, from 0 to %u", s, SNAP_MAX);
		return -1;
	}
	*snap = (uint32_t)v;
	return 0;
}

/* pattern with each "%p" replaced by the pid. */
static int expand(const char *pattern, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = pattern; *p; p++) {
		int n = p[0] == '%' && p[1] == 'p'
			    ? snprintf(out + o, len - o, "%ld", (long)getpid())
			    : snprintf(out + o, len - o, "%c", *p);

		if (n < 0 || (size_t)n >= len - o)
			return -1;
		o += (size_t)n;
		p += p[0] == '%' && p[1] == 'p';
	}
	return 0;
}

struct uro_pcap *uro_pcap_open(const char *pattern, uint32_t snap, char *err, size_t errlen)
{
	struct pcap_file_header h = {.magic = PCAP_MAGIC,
				     .major = 2,
				     .minor = 4,
				     .snaplen = SNAP_MAX,
				     .linktype = LINKTYPE_RAW};
	struct uro_pcap *t;
	char path[4096];

	if (expand(pattern, path, sizeof(path))) {
		snprintf(err, errlen, "trace file name too long");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return NULL;
	}
	t->snap = snap;
	t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	if (t->fd < 0 || write(t->fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
		snprintf(err, errlen, "trace file %s: %s", path, strerror(errno));
		uro_pcap_close(t);
		return NULL;
	}
	return t;
}

/* The test open() would make, short of creating the file: a program that
 * never goes on the wire should not leave an empty trace behind. */
int uro_pcap_check(const char *pattern, char *err, size_t errlen)
{
	char path[4096], dir[4096];
	struct stat st;
	char *slash;

	if (expand(pattern, path, sizeof(path))) {
		snprintf(err, errlen, "trace file name too long");
		return -1;
	}
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "%s is a directory", path);
			return -1;
		}
		if (access(path, W_OK)) {
			snprintf(err, errlen, "%s", strerror(errno));
			return -1;
		}
		return 0;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = '\0';
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		int why = errno;

		snprintf(err, errlen, "directory %s: %s", dir,
			 strerror(access(dir, F_OK) ? why : ENOTDIR));
		return -1;
	}
	if (access(dir, W_OK | X_OK)) {
		snprintf(err, errlen, "cannot create a file in %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

struct uro_pcap *uro_pcap_from_env(char *err, size_t errlen)
{
	const char *path = getenv("UROCE_PCAP");
	const char *snap_s = getenv("UROCE_PCAP_SNAP");
	uint32_t snap = 0;
	char why[160];

	*err = '\0';
	if (!path || !*path)
		return NULL;
	if (snap_s && *snap_s && uro_pcap_snap_parse(snap_s, &snap, why, sizeof(why))) {
		snprintf(err, errlen, "UROCE_PCAP_SNAP: %s", why);
		return NULL;
	}
	return uro_pcap_open(path, snap, err, errlen);
}

void uro_pcap_close(struct uro_pcap *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	free(t);
}

/* The IP and UDP headers of a packet of len bytes (BTH to ICRC), with
 * IPv4 identification id: their length. */
static size_t headers(uint8_t *buf, const uint8_t src[16], uint16_t sport, const uint8_t dst[16],
		      uint16_t id, size_t len)
{
	size_t hl = uro_roce_ip_udp(buf, src, dst, sport, len);

	if (hl == URO_ROCE_IPV4_UDP_LEN) {
		buf[4] = (uint8_t)(id >> 8);
		buf[5] = (uint8_t)id;
	}
	return hl;
}

/* The length of the packet in buf (IP header to ICRC, len bytes) with
 * its payload cut to at most snap bytes in whole words, so with no pad:
 * len for a packet that does not parse or needs no cut. */
static size_t snapped_len(const uint8_t *buf, size_t len, uint32_t snap)
{
	struct uro_roce_packet p;

	if (uro_roce_parse(buf, len, &p) != ROCE_OK || p.payload_len <= snap)
		return len;
	return (size_t)(p.payload - buf) + (snap & ~3u) + URO_ROCE_ICRC_LEN;
}

void uro_pcap_packet(struct uro_pcap *t, const uint8_t src[16], uint16_t sport,
		     const uint8_t dst[16], uint16_t id, const uint8_t *roce, size_t len)
{
	uint8_t buf[URO_ROCE_IP_UDP_MAX + URO_PCAP_MAX_ROCE];
	struct pcap_record_header r;
	struct timespec now;
	struct iovec iov[2] = {{&r, sizeof(r)}, {buf, 0}};
	size_t hl, cut;

	if (len > URO_PCAP_MAX_ROCE)
		return; /* longer than any packet uroce sends or takes */
	clock_gettime(CLOCK_REALTIME, &now);
	r.sec = (uint32_t)now.tv_sec;
	r.usec = (uint32_t)(now.tv_nsec / 1000);
	hl = headers(buf, src, sport, dst, id, len);
	r.orig_len = (uint32_t)(hl + len);
	memcpy(buf + hl, roce, len);
	iov[1].iov_len = r.orig_len;
	/* A packet cut short gets the lengths, pad and ICRC of the shorter
	 * packet: decoders read it whole (the InfiniBand dissector takes a
	 * truncated one for malformed); the record's original length keeps
	 * the real one. */
	if (t->snap && (cut = snapped_len(buf, r.orig_len, t->snap)) < r.orig_len) {
		headers(buf, src, sport, dst, id, cut - hl);
		buf[hl + 1] &= (uint8_t)~0x30; /* BTH PadCnt */
		uro_roce_icrc_put(buf, hl - 8, cut - URO_ROCE_ICRC_LEN);
		iov[1].iov_len = cut;
	}
	if (hl == URO_ROCE_IPV4_UDP_LEN)
		uro_roce_ipv4_checksum(buf);
	r.incl_len = (uint32_t)iov[1].iov_len;
	/* A trace that cannot be written loses records, never packets. */
	(void)!writev(t->fd, iov, 2);
}
