/* Diagnostics a user can find: one line on stderr, prefixed "uroce:".
 * UROCE_LOG=quiet silences them; UROCE_LOG=debug adds debug lines. */
#ifndef URO_LOG_H
#define URO_LOG_H

enum uro_log_level { URO_LOG_ERROR, URO_LOG_WARN, URO_LOG_DEBUG };

void uro_log(enum uro_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define uro_warn(...)  uro_log(URO_LOG_WARN, __VA_ARGS__)
#define uro_debug(...) uro_log(URO_LOG_DEBUG, __VA_ARGS__)

#endif
