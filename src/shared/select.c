/*
 * shared/select.c - the selection options in a shared job (--include,
 * --exclude, --min-size, --max-size; select.h): every host of a scan
 * generation lists SRC with one selection, the gen's first host's (009_
 * selection.sql: a host with another is refused until the gen is over);
 * the scan leaves out what it leaves out (an excluded directory is never
 * opened); and, as on a single host, a path it leaves out is never a
 * source deletion: a row a finished scan did not see that it leaves out
 * takes the gen instead of being marked removed, and --delete deletes
 * nothing it leaves out. --files-from is part of the selection by its
 * count and hash (select.h); which of its paths no host found is a
 * question of the whole job's scan, asked once the job is over
 * (shared_select_missing: the manifest, then SRC for what it lacks).
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "buf.h"
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pattern in the selection's text: quoted, bytes that are not UTF-8 as
 * \xHH (the column is text). */
#define ESC (FERRY_ESC_QUOTE | FERRY_ESC_TERMINAL)
/* Unseen rows asked about a statement. */
#define UNSEEN_BATCH 1000

int shared_select_open(struct shared *s)
{
        int rc = ferry_select_new(s->opt, &s->select, s->err);
        if (rc)
                s->code = rc;
        return rc;
}

void shared_select_free(struct shared *s)
{
        ferry_select_free(s->select);
        s->select = NULL;
}

/* The selection as its options would give it, in the order they are
 * tried ("" for none): what two hosts compare. */
static char *selection_text(const struct shared *s)
{
        const struct ferry_options *o = s->opt;
        struct ferry_buf b = FERRY_BUF_INIT;
        for (size_t i = 0; i < o->n_filters; i++) {
                const char *p = o->filters[i].pattern;
                ferry_buf_adds(&b, b.len ? " " : "");
                ferry_buf_adds(&b, o->filters[i].include ? "--include "
                                                         : "--exclude ");
                ferry_buf_add_quoted(&b, p, strlen(p), ESC);
        }
        for (size_t i = 0; i < o->n_excludes; i++) {
                ferry_buf_adds(&b, b.len ? " --exclude " : "--exclude ");
                ferry_buf_add_quoted(&b, o->excludes[i], strlen(o->excludes[i]),
                                     FERRY_ESC_QUOTE);
        }
        if (o->min_size >= 0)
                ferry_buf_addf(&b, "%s--min-size %lld", b.len ? " " : "",
                               (long long)o->min_size);
        if (o->max_size >= 0)
                ferry_buf_addf(&b, "%s--max-size %lld", b.len ? " " : "",
                               (long long)o->max_size);
        bool oom = false;
        char *list = ferry_select_files_digest(s->select, &oom);
        if (list)
                ferry_buf_addf(&b, "%s--files-from (%s)", b.len ? " " : "",
                               list);
        free(list);
        if (oom) {
                ferry_buf_release(&b);
                return NULL;
        }
        return ferry_buf_detach(&b, NULL); /* NULL when out of memory */
}

/* The refusal of a host whose selection mine is not the gen's, theirs. */
static int refuse(struct shared *s, const char *mine, const char *theirs)
{
        return shared_fail(s, FERRY_EUSAGE,
                           "job '%s' is scanning SRC with %s%s; this host "
                           "has %s%s: give every host of a run the same "
                           "selection (another may start once this one is "
                           "over)",
                           s->opt->job_name,
                           theirs[0] ? "" : "no selection options", theirs,
                           mine[0] ? "" : "none", mine);
}

int shared_select_join(struct shared *s)
{
        char *mine = selection_text(s), *theirs = NULL;
        if (!mine)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        int rc = ferry_pg_selection(s->pg, mine, &theirs);
        if (rc)
                rc = shared_pg_fail(s, rc);
        else if (theirs)
                rc = refuse(s, mine, theirs);
        free(theirs);
        free(mine);
        return rc;
}

int shared_select_dry(struct shared *s, const char *theirs)
{
        char *mine = selection_text(s);
        if (!mine)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        int rc = theirs && strcmp(mine, theirs) ? refuse(s, mine, theirs) : 0;
        free(mine);
        return rc;
}

bool shared_select_out(const struct shared *s, const char *dir, size_t dlen,
                       const char *name, const struct ferry_stat *st)
{
        if (!s->select)
                return false;
        char *rel = NULL;
        if (ferry_select_need_path(s->select) &&
            asprintf(&rel, "%.*s%s%s", (int)dlen, dir, dlen ? "/" : "", name) <
                    0)
                return false; /* no memory: listed, as without rules */
        bool out = !ferry_select_entry(s->select, rel, name, S_ISDIR(st->mode),
                                       S_ISREG(st->mode), st->size);
        free(rel);
        return out;
}

bool shared_select_protects(const struct shared *s, const char *dir,
                            const char *name, bool is_dir)
{
        if (!s->select)
                return false;
        char *path = name ? ferry_buf_join(dir, name) : strdup(dir);
        /* no memory: the safe side, not deleted */
        bool keep = !path || ferry_select_protects(s->select, path, is_dir);
        free(path);
        return keep;
}

int shared_select_keep(struct shared *s)
{
        if (!s->select || ferry_pg_gen(s->pg) <= 1)
                return 0;
        int64_t *ids = calloc(UNSEEN_BATCH, sizeof(*ids));
        if (!ids)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        int64_t after = 0;
        int rc = 0;
        for (;;) {
                struct ferry_pg_claim c;
                rc = ferry_pg_unseen(s->pg, after, UNSEEN_BATCH, &c);
                if (rc || !c.n) {
                        ferry_pg_claim_release(&c);
                        break;
                }
                size_t k = 0;
                for (size_t i = 0; i < c.n; i++) {
                        const struct ferry_pg_row *r = &c.rows[i];
                        if (ferry_select_keeps(s->select, s->srcfd, r->path,
                                               r->path_len, r->name,
                                               r->name_len, r->type, r->size,
                                               true))
                                ids[k++] = r->id;
                }
                after = c.rows[c.n - 1].id;
                ferry_pg_claim_release(&c);
                if ((rc = ferry_pg_keep_unseen(s->pg, ids, k)))
                        break;
        }
        free(ids);
        return rc ? shared_pg_fail(s, rc) : 0;
}

/* Whether SRC holds dir/name after all: a listed path the manifest has
 * no row of may be one the scan left out (--exclude, the sizes, -x, a
 * kind of entry not copied), which a single host finds and does not call
 * missing either. Unsure (an error other than its absence): held. */
static bool in_src(const struct shared *s, const char *dir, const char *name)
{
        int fd = -1;
        struct ferry_stat st;
        int e = ferry_fsio_open_dir(s->srcfd, dir, &fd);
        if (!e)
                e = ferry_fsio_statat(fd, name, &st);
        ferry_fsio_close(&fd);
        return e != ENOENT && e != ENOTDIR;
}

uint64_t shared_select_missing(struct shared *s)
{
        const char *dirs[FERRY_PG_BATCH_MAX], *names[FERRY_PG_BATCH_MAX];
        char *own[FERRY_PG_BATCH_MAX];
        bool absent[FERRY_PG_BATCH_MAX];
        uint64_t missing = 0;
        size_t at = 0;
        const char *path = ferry_select_next_unfound(s->select, &at);
        while (path && !s->code) {
                size_t n = 0;
                /* a batch of the paths this host's scan did not find (what
                 * it found, the job has), split at their last '/' */
                for (; path && n < FERRY_PG_BATCH_MAX;
                     path = ferry_select_next_unfound(s->select, &at)) {
                        const char *slash = strrchr(path, '/');
                        own[n] = slash ? strndup(path, (size_t)(slash - path))
                                       : strdup("");
                        if (!own[n]) {
                                shared_fail(s, FERRY_EINTERNAL,
                                            "out of memory");
                                break;
                        }
                        dirs[n] = own[n];
                        names[n++] = slash ? slash + 1 : path;
                }
                int rc = s->code ? 0
                                 : ferry_pg_paths_absent(s->pg, dirs, names, n,
                                                         absent);
                if (rc)
                        shared_pg_fail(s, rc);
                for (size_t i = 0; i < n; i++) {
                        if (!s->code && absent[i] &&
                            !in_src(s, dirs[i], names[i])) {
                                const char *d = dirs[i];
                                shared_event(s, FERRY_EV_WARNING, d, strlen(d),
                                             names[i], strlen(names[i]),
                                             FERRY_SELECT_MISSING, NULL);
                                missing++;
                        }
                        free(own[i]);
                }
        }
        return missing;
}
