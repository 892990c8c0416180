/* Big-endian fields, as the wire's headers (IBTA 9.2) and the MADs (IBTA
 * 13.4) carry them: read and written a byte at a time, so that no
 * alignment or C bitfield layout is assumed. */
#ifndef URO_BIG_ENDIAN_H
#define URO_BIG_ENDIAN_H

#include <stdint.h>

static inline uint16_t uro_get16(const uint8_t *b)
{
	return (uint16_t)(b[0] << 8 | b[1]);
}

static inline uint32_t uro_get24(const uint8_t *b)
{
	return (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
}

static inline uint32_t uro_get32(const uint8_t *b)
{
	return (uint32_t)uro_get16(b) << 16 | uro_get16(b + 2);
}

static inline uint64_t uro_get64(const uint8_t *b)
{
	return (uint64_t)uro_get32(b) << 32 | uro_get32(b + 4);
}

static inline void uro_put16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static inline void uro_put24(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 16);
	uro_put16(b + 1, (uint16_t)v);
}

static inline void uro_put32(uint8_t *b, uint32_t v)
{
	uro_put16(b, (uint16_t)(v >> 16));
	uro_put16(b + 2, (uint16_t)v);
}

static inline void uro_put64(uint8_t *b, uint64_t v)
{
	uro_put32(b, (uint32_t)(v >> 32));
	uro_put32(b + 4, (uint32_t)v);
}

#endif
