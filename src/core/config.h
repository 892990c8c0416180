/* The link configuration: which soft HCAs exist and which netdev each is
 * bound to. One line a link:
 *
 *     link NAME netdev IFACE [type roce|ib] [lid N]
 *
 * No file at all means the embedded default: uroce0 on lo, type roce. */
#ifndef URO_CONFIG_H
#define URO_CONFIG_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"

#define URO_MAX_LINKS 32

enum uro_link_type { URO_LINK_ROCE, URO_LINK_IB };

struct uro_link {
	char name[URO_NAME_MAX];
	char netdev[IFNAMSIZ];
	enum uro_link_type type;
	uint16_t lid; /* IB links only: unicast LID, unique among the links */
};

struct uro_config {
	struct uro_link links[URO_MAX_LINKS];
	int n;
};

/* UROCE_CONFIG, else $XDG_CONFIG_HOME/uroce/links.conf, else ~/.config/...,
 * canonical (symlinks and relative names resolved, as far as it exists). */
int uro_config_path(char *buf, size_t len);

/* What identifies a link to the programs that opened it: the canonical
 * path of its configuration (the file, or where it would be when the
 * embedded default stands for none) and the link's definition. Never 0.
 * The file's inode would not do: every save replaces the file. */
uint64_t uro_link_id(const char *config_path, const struct uro_link *l);

void uro_config_default(struct uro_config *cfg);
/* err receives "FILE:LINE: what is wrong" on failure (-1). */
int uro_config_parse(const char *text, const char *file, struct uro_config *cfg, char *err,
		     size_t errlen);
int uro_config_load(const char *path, struct uro_config *cfg, char *err, size_t errlen);
/* A file that defines no link leaves no device, on purpose (a user may want
 * none); this says so, and how to get the default back, into buf. */
void uro_config_no_links_note(const char *path, char *buf, size_t len);
int uro_config_save(const char *path, const struct uro_config *cfg, char *err, size_t errlen);

const struct uro_link *uro_config_find(const struct uro_config *cfg, const char *name);
/* Adds a validated link; assigns a LID to an IB link that has none. */
int uro_config_add(struct uro_config *cfg, const struct uro_link *link, char *err, size_t errlen);
int uro_config_delete(struct uro_config *cfg, const char *name, char *err, size_t errlen);

const char *uro_link_type_name(enum uro_link_type type);
int uro_link_type_parse(const char *s, enum uro_link_type *type);
int uro_link_name_valid(const char *name);

#endif
