/*
 * failure.h - the messages a struct ferry_failure (ferry.h) is recorded
 * with.
 *
 * The public ferry_failure_str() says what a cause is ("permission denied
 * reading SRC"), for headings that group many rows. A row's own message is
 * the one ferry has always written ("read source: Permission denied",
 * "cannot read directory: ..."): ferry_failure_message() makes it from the
 * same fields, so no caller keeps a table of words of its own.
 */
#ifndef FERRY_FAILURE_H
#define FERRY_FAILURE_H

#include "ferry.h"

#include <stdbool.h>
#include <stddef.h>

/* A failure of side at step with err (a compound literal's worth). */
static inline struct ferry_failure
ferry_failure_of(enum ferry_side side, enum ferry_step step, int err)
{
        struct ferry_failure f = {side, step, err};
        return f;
}

/* The message of a row that failed with f: "PHRASE: strerror" or, for a
 * refusal (err 0), the phrase alone. dir: the row is a directory's (its
 * scan or its metadata), whose phrases differ ("cannot read directory",
 * "set directory mode"). Returns buf. */
char *ferry_failure_message(const struct ferry_failure *f, bool dir, char *buf,
                            size_t size);

#endif
