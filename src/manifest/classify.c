/*
 * manifest/classify.c - what the scan makes of a row it finds again whose
 * data is as copied (type, size, mtime, inode the same): unchanged, or
 * UP_META when its metadata alone moved in SRC (mode, owner, link count,
 * ctime; the access time with --atimes), when the run wants metadata an
 * earlier run left out (m->wanted against the row's applied), or when it
 * is a name of a hardlink group that was copied apart (--no-hard-links
 * before). Such a row is pending again with need META (applied in place,
 * copy_meta.c) or, a name that is now to be a link, need DATA (linked, no
 * data written). Its recorded stat stays the one applied: the copier
 * compares SRC's with it (the ctime rule). Also what the scan reads of a
 * row (mf_read_row) and makes of it against SRC's stat (mf_read_found).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

enum classify_stmt { S_FILE_META, S_FILE_NEED, S_NSTMTS };

// clang-format off
static const char *const classify_sql[S_NSTMTS] = {
        [S_FILE_META] =
                "UPDATE files SET state = " SQL_PENDING ", gen = ?2,"
                " need = ?3, hl = ?4 WHERE id = ?1",
        [S_FILE_NEED] = "SELECT need FROM files WHERE id = ?1",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "classify.c: statement table too big");

#define STMT(id) mf_stmt(m, T_CLASSIFY, id, classify_sql[id])

void mf_read_row(sqlite3_stmt *s, int col, bool atime, struct mf_row *r)
{
        r->id = sqlite3_column_int64(s, col);
        r->type = sqlite3_column_int(s, col + 1);
        r->size = (uint64_t)sqlite3_column_int64(s, col + 2);
        r->mtime = mf_column_time(s, col + 3);
        r->ctime = mf_column_time(s, col + 4);
        r->mode = (uint32_t)sqlite3_column_int64(s, col + 5);
        r->ino = (uint64_t)sqlite3_column_int64(s, col + 6);
        r->state = sqlite3_column_int(s, col + 7);
        r->gen = sqlite3_column_int64(s, col + 8);
        r->applied = (uint32_t)sqlite3_column_int64(s, col + 9);
        r->hl = sqlite3_column_type(s, col + 10) == SQLITE_NULL
                        ? 0
                        : sqlite3_column_int64(s, col + 10);
        r->rdev = (uint64_t)sqlite3_column_int64(s, col + 11);
        r->uid = (uint32_t)sqlite3_column_int64(s, col + 12);
        r->gid = (uint32_t)sqlite3_column_int64(s, col + 13);
        /* NULL: not tracked before */
        r->has_atime = atime && sqlite3_column_type(s, col + 14) != SQLITE_NULL;
        r->atime = r->has_atime ? mf_column_time(s, col + 14)
                                : (struct ferry_time){0, 0};
}

void mf_read_found(const struct ferry_manifest *m, const struct mf_row *r,
                   const struct ferry_stat *st, struct mf_found *f)
{
        f->id = r->id;
        f->state = r->state;
        f->applied = r->applied;
        f->need = MF_NEED_DATA; /* a done row's; mf_found_need reads it */
        f->hl = r->hl;
        f->data_same =
                r->type == (int)mf_ftype_of(st->mode) && r->size == st->size &&
                ferry_time_eq(r->mtime, st->mtime) && r->ino == st->ino &&
                r->rdev == st->rdev && f->state != ST_REMOVED;
        /* a chown or a new link count moves the ctime too: which of
         * them it was, the copier tells (copy_meta.c, the ctime rule), so
         * the scan reads no more columns than it needs (bench d) */
        f->inode_same = f->data_same && r->mode == st->mode &&
                        r->uid == st->uid && r->gid == st->gid;
        f->meta_same = f->data_same && ferry_time_eq(r->ctime, st->ctime) &&
                       r->mode == st->mode;
        /* --atimes: a changed access time */
        if ((m->wanted & MF_AP_ATIMES) && r->has_atime &&
            !ferry_time_eq(r->atime, st->atime))
                f->meta_same = false;
}

int mf_found_need(struct ferry_manifest *m, struct mf_found *f)
{
        sqlite3_stmt *s = STMT(S_FILE_NEED);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, f->id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                f->need = sqlite3_column_int(s, 0);
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

/* A done row (or one pending for its metadata) whose data is as copied:
 * its metadata changed in SRC, or the run wants what an earlier one left
 * out (m->wanted), or it is a name of a hardlink group copied apart
 * (--no-hard-links before). Then it is pending again: its metadata
 * applied in place (need META), or, a name that is now to be a link to
 * its group's first name, linked (need DATA; no data is written).
 * *meta false: nothing to do. */
int mf_classify(struct ferry_manifest *m, const struct mf_found *f,
                const struct ferry_stat *st, int64_t gen, bool hard_links,
                bool *meta)
{
        enum ferry_ftype t = mf_ftype_of(st->mode);
        /* a hardlink name's inode is its first name's: that row holds
         * what was applied to it */
        uint32_t wanted = f->hl > 0         ? 0
                          : t == FT_REG     ? m->wanted
                          : t == FT_SPECIAL ? m->wanted_special
                                            : m->wanted_link;
        bool links = hard_links && t == FT_REG && st->nlink >= 2 &&
                     !(f->applied & MF_AP_LINKS);
        /* a follower (a name linked to its first name's copy) whose
         * inode moved its ctime alone (a new link: cp -al; a setfattr):
         * the first name's row applies what moved to the inode, and
         * should its data be copied anew, its followers are linked again
         * (links.c, mf_relink_followers): no row per name is written */
        bool follower_same = f->hl > 0 && f->inode_same && !links &&
                             hard_links && st->nlink >= 2 &&
                             !(m->wanted & MF_AP_ATIMES);
        if (follower_same) { /* and its first name is still this inode's */
                int64_t lead;
                int rc = mf_hardlink_of(m, st, hard_links, f->id, &lead);
                if (rc)
                        return rc;
                follower_same = lead == f->hl;
        }
        *meta = !follower_same &&
                (!f->meta_same || (wanted & ~f->applied) || links);
        if (!*meta)
                return 0;
        int64_t hl = f->hl;
        int need = MF_NEED_META;
        if (!f->meta_same || links) { /* the link count may have moved */
                int rc = mf_hardlink_of(m, st, hard_links, f->id, &hl);
                if (rc)
                        return rc;
                bool swapped = false;
                if (hl > 0 && !f->hl &&
                    (rc = mf_regroup(m, st, f->id, hl, gen, &swapped)))
                        return rc;
                if (swapped)
                        hl = MF_HL_LEADER; /* its copy is the group's */
                else if (hl > 0 && hl != f->hl)
                        need = MF_NEED_DATA; /* a link to its first name */
        }
        sqlite3_stmt *s = STMT(S_FILE_META);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, f->id);
        sqlite3_bind_int64(s, 2, gen);
        sqlite3_bind_int(s, 3, need);
        mf_bind_hl(s, 4, hl);
        return mf_exec_stmt(m, s, "file update");
}
