/*
 * failure.c - struct ferry_failure as words (ferry.h, failure.h).
 *
 * Owns the table that gives each step its words: the phrase of a
 * cause ("reading", for "permission denied reading SRC") and the phrase
 * of a row's message ("read source", for "read source: Permission
 * denied"). Nothing here decides anything; it only renders.
 */
#include "failure.h"

#include <stdio.h>
#include <string.h>

struct step_words {
        const char *name;   /* ferry_step_str, and the cause key */
        const char *doing;  /* "permission denied <doing> SRC" */
        const char *src;    /* a file row's message on SRC, or NULL */
        const char *dst;    /* on DST, or NULL */
        const char *in_dir; /* a directory row's message, or NULL */
};

static const struct step_words words[] = {
        [FERRY_STEP_OPEN] = {"open", "opening a file of", "open source", NULL,
                             NULL},
        [FERRY_STEP_OPENDIR] = {"opendir", "opening a directory of",
                                "open source directory", NULL,
                                "cannot read directory"},
        [FERRY_STEP_READDIR] = {"readdir", "listing a directory of", NULL, NULL,
                                "cannot read directory"},
        [FERRY_STEP_STAT] = {"stat", "reading attributes of", "stat source",
                             NULL, "cannot read directory"},
        [FERRY_STEP_READ] = {"read", "reading", "read source", NULL, NULL},
        [FERRY_STEP_READLINK] = {"readlink", "reading a symlink of",
                                 "read source link", NULL, NULL},
        [FERRY_STEP_MKDIR] = {"mkdir", "making a directory in", NULL,
                              "create destination directory",
                              "create directory"},
        [FERRY_STEP_CREATE] = {"create", "creating a file in", NULL,
                               "create destination", NULL},
        [FERRY_STEP_SYMLINK] = {"symlink", "creating a symlink in", NULL,
                                "create destination link", NULL},
        [FERRY_STEP_WRITE] = {"write", "writing", NULL, "write destination",
                              NULL},
        [FERRY_STEP_FSYNC] = {"fsync", "syncing a file of", NULL,
                              "fsync destination", NULL},
        [FERRY_STEP_CLOSE] = {"close", "closing a file of", NULL,
                              "close destination", NULL},
        [FERRY_STEP_CHOWN] = {"chown", "setting an owner in", NULL, "set owner",
                              "set directory owner"},
        [FERRY_STEP_CHMOD] = {"chmod", "setting a mode in", NULL, "set mode",
                              "set directory mode"},
        [FERRY_STEP_UTIMES] = {"utimes", "setting times in", NULL, "set times",
                               "set directory times"},
        [FERRY_STEP_LCHOWN] = {"lchown", "setting a symlink's owner in", NULL,
                               "set link owner", NULL},
        [FERRY_STEP_LUTIMES] = {"lutimes", "setting a symlink's times in", NULL,
                                "set link times", NULL},
        [FERRY_STEP_LINK] = {"link", "hard-linking in", NULL,
                             "link to first name", NULL},
        [FERRY_STEP_RENAME] = {"rename", "renaming into place in", NULL,
                               "rename into place", NULL},
        [FERRY_STEP_VERIFY] = {"verify", "verifying", "source", "destination",
                               NULL},
        [FERRY_STEP_COPY] = {"copy", "copying to", "copy", "copy", NULL},
        [FERRY_STEP_CLEAR] = {"clear", "clearing the way in", NULL,
                              "clear the way", NULL},
        [FERRY_STEP_XATTR_READ] = {"xattr-read", "reading xattrs of",
                                   "read source xattrs", NULL,
                                   "read directory xattrs"},
        [FERRY_STEP_XATTR] = {"xattr", "setting an xattr in", NULL, "set xattr",
                              "set directory xattr"},
        [FERRY_STEP_ACL] = {"acl", "setting an ACL in", NULL, "set ACL",
                            "set directory ACL"},
        [FERRY_STEP_MKNOD] = {"mknod", "making a special file in", NULL,
                              "make special file", NULL},
        [FERRY_STEP_CHANGED] = {"changed", NULL, "source changed while copied",
                                NULL, NULL},
        [FERRY_STEP_NAME] = {"name", NULL, NULL,
                             "name not allowed or taken on the destination",
                             NULL},
        [FERRY_STEP_NOT_OURS] = {"not-ours", NULL, NULL,
                                 "not replaced: the destination has an entry "
                                 "here that ferry did not write",
                                 NULL},
        [FERRY_STEP_MISSING] = {"missing", NULL, "source", "destination", NULL},
        [FERRY_STEP_DIFFERS] = {"differs", NULL, "source", "destination", NULL},
        [FERRY_STEP_TOO_BIG] = {"too-big", NULL, NULL,
                                "larger than the destination can hold", NULL},
        [FERRY_STEP_META_DIFFERS] = {"meta-differs", NULL, "source metadata",
                                     "destination metadata", NULL},
};

static const struct step_words *words_of(enum ferry_step step)
{
        size_t i = (size_t)step;
        if (i >= sizeof(words) / sizeof(words[0]) || !words[i].name)
                return NULL;
        return &words[i];
}

const char *ferry_side_str(enum ferry_side side)
{
        switch (side) {
        case FERRY_SIDE_SRC: return "SRC";
        case FERRY_SIDE_DST: return "DST";
        case FERRY_SIDE_MANIFEST: return "manifest";
        default: return "";
        }
}

const char *ferry_step_str(enum ferry_step step)
{
        const struct step_words *w = words_of(step);
        return w ? w->name : "";
}

char *ferry_failure_key(const struct ferry_failure *f, char *buf, size_t size)
{
        static const char *const key_side[] = {"none", "src", "dst",
                                               "manifest"};
        unsigned s = (unsigned)f->side < 4 ? (unsigned)f->side : 0;
        snprintf(buf, size, "%s:%s:%d", key_side[s],
                 f->step ? ferry_step_str(f->step) : "none", f->err);
        return buf;
}

/* strerror(err) with its first letter in lower case, as in mid-sentence. */
static void error_words(int err, char *buf, size_t size)
{
        snprintf(buf, size, "%s", strerror(err));
        if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
                buf[0] = (char)(buf[0] - 'A' + 'a');
}

char *ferry_failure_str(const struct ferry_failure *f, char *buf, size_t size)
{
        const struct step_words *w = words_of(f->step);
        const char *side = ferry_side_str(f->side);
        if (!w || !side[0]) {
                snprintf(buf, size,
                         "failed (cause not recorded: an older "
                         "ferry wrote it)");
                return buf;
        }
        char e[128];
        if (f->err) {
                error_words(f->err, e, sizeof(e));
                snprintf(buf, size, "%s %s %s", e,
                         w->doing ? w->doing : w->name, side);
                return buf;
        }
        switch (f->step) {
        case FERRY_STEP_CHANGED:
                snprintf(buf, size, "%s changed while copied", side);
                break;
        case FERRY_STEP_NAME:
                snprintf(buf, size, "name not allowed or taken on %s", side);
                break;
        case FERRY_STEP_NOT_OURS:
                snprintf(buf, size,
                         "not replaced: an entry on %s that is not ferry's",
                         side);
                break;
        case FERRY_STEP_TOO_BIG:
                snprintf(buf, size, "larger than %s can hold", side);
                break;
        case FERRY_STEP_MISSING:
                snprintf(buf, size, "missing on %s", side);
                break;
        case FERRY_STEP_DIFFERS: snprintf(buf, size, "%s differs", side); break;
        default: snprintf(buf, size, "%s %s failed", w->name, side); break;
        }
        return buf;
}

char *ferry_failure_message(const struct ferry_failure *f, bool dir, char *buf,
                            size_t size)
{
        const struct step_words *w = words_of(f->step);
        const char *phrase = NULL;
        if (w)
                phrase = dir                         ? w->in_dir
                         : f->side == FERRY_SIDE_SRC ? w->src
                                                     : w->dst;
        if (!phrase && w) /* a pair no caller makes: words of either */
                phrase = w->src ? w->src : w->dst ? w->dst : w->name;
        if (!phrase)
                phrase = "failed";
        if (f->err)
                snprintf(buf, size, "%s: %s", phrase, strerror(f->err));
        else
                snprintf(buf, size, "%s", phrase);
        return buf;
}
