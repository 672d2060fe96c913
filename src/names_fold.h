/*
 * names_fold.h - other spellings in SRC, for a case-insensitive DST.
 *
 * On a case-insensitive DST, the DST path of a row the scan found gone may
 * now hold the copy of another SRC file whose path differs only by case:
 * --delete must not delete it. This asks SRC, folding names as names.c
 * does (ferry_names_casecmp), and keeps the last few directories it read.
 *
 * Calling sequence (the coordinator thread; not thread-safe):
 *   struct ferry_fold *fold = NULL;
 *   if (ferry_fold_other_spelling(&fold, srcfd, names, dir, name)) keep it;
 *   ferry_fold_free(fold);
 */
#ifndef FERRY_NAMES_FOLD_H
#define FERRY_NAMES_FOLD_H

#include "names.h"

#include <stdbool.h>

struct ferry_fold; /* the cache of SRC directories read */

/* True when SRC (srcfd) holds another spelling of any component of
 * dir/name under the spelling of the ones before it, or when that cannot
 * be told (keeping a stale copy is better than deleting a live one); false
 * at once when names says DST is case-sensitive. *cache is made on the
 * first call that needs it (NULL before), borrowed otherwise. */
bool ferry_fold_other_spelling(struct ferry_fold **cache, int srcfd,
                               const struct ferry_names *names, const char *dir,
                               const char *name);

/* Frees the cache (NULL is fine). */
void ferry_fold_free(struct ferry_fold *cache);

#endif
