/*
 * manifest/links.c - hardlink groups: the first name of a group (hl = -1)
 * is copied with data, the other names (hl = its id) are linked to it in
 * DST. Owns the leader lookup of a new or changed row, the election of
 * a new first name when the old one failed, vanished or left SRC, the
 * regrouping of a done file that got its first other name (mf_regroup),
 * and the new links a first name's new copy needs (mf_relink_followers:
 * the scan writes no row for a follower whose inode moved its ctime
 * alone, classify.c).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

/* names of a group that can take over as first name: not failed, gone */
#define LIVE " NOT IN (" SQL_FAILED ", " SQL_VANISHED ", " SQL_REMOVED ")"

enum links_stmt {
        S_FILE_LEADER,
        S_FORGET_GROUP,
        S_ELECT_FIND,
        S_ELECT_SET,
        S_NEXT_GONE_LEADER,
        S_NEW_LEADER,
        S_RELINK,
        S_NSTMTS
};

// clang-format off
static const char *const links_sql[S_NSTMTS] = {
        [S_FILE_LEADER] =
                "SELECT id FROM files WHERE ino = ?1 AND dev = ?2"
                " AND hl = " SQL_LEADER " AND state NOT IN " SQL_GONE
                " LIMIT 1",
        [S_FORGET_GROUP] =
                "UPDATE files SET hl = NULL WHERE id = ?1"
                " AND state IN " SQL_GONE,
        /* the group's other first name if the scan already made one, else
         * the lowest follower; NULL when none can take over */
        [S_ELECT_FIND] =
                "SELECT ino, dev, coalesce((SELECT min(id)"
                " FROM files f WHERE f.ino = o.ino AND"
                " f.dev = o.dev AND f.hl = " SQL_LEADER " AND"
                " f.id != o.id AND f.state" LIVE "),"
                " (SELECT min(id) FROM files f"
                " WHERE f.ino = o.ino AND f.dev = o.dev AND"
                " f.hl = o.id AND f.state" LIVE "))"
                " FROM files o WHERE o.id = ?1 AND o.hl = " SQL_LEADER,
        [S_ELECT_SET] =
                "UPDATE files SET hl = CASE WHEN id = ?3"
                " THEN " SQL_LEADER " ELSE ?3 END WHERE ino = ?1"
                " AND dev = ?2 AND (hl = ?4 OR id = ?4)",
        /* each state through the files_removed index */
        [S_NEXT_GONE_LEADER] =
                "SELECT min(id) FROM (SELECT min(id) AS id"
                " FROM files WHERE state IN " SQL_GONE " AND"
                " state = " SQL_VANISHED " AND id > ?1 AND hl = " SQL_LEADER
                " UNION ALL SELECT min(id) FROM files WHERE"
                " state IN " SQL_GONE " AND state = " SQL_REMOVED
                " AND id > ?1 AND hl = " SQL_LEADER ")",
        /* a first name this scan made (pending for its data) */
        [S_NEW_LEADER] =
                "SELECT 1 FROM files WHERE id = ?1 AND hl = " SQL_LEADER
                " AND state = " SQL_PENDING " AND need = " SQL_NEED_DATA
                " AND gen = ?2",
        /* through files_by_inode */
        [S_RELINK] =
                "UPDATE files SET state = " SQL_PENDING ", need = "
                SQL_NEED_DATA ", gen = (SELECT gen FROM files WHERE id = ?1)"
                " WHERE ino = ?2 AND dev = ?3 AND hl = ?1"
                " AND state = " SQL_DONE,
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "links.c: statement table too big");

#define STMT(id) mf_stmt(m, T_LINKS, id, links_sql[id])

int mf_hardlink_of(struct ferry_manifest *m, const struct ferry_stat *st,
                   bool hard_links, int64_t self, int64_t *hl)
{
        *hl = 0;
        /* files and special files (cp -a, rsync -H link FIFOs too) */
        if (!hard_links || S_ISLNK(st->mode) || st->nlink < 2)
                return 0;
        sqlite3_stmt *s = STMT(S_FILE_LEADER);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, (int64_t)st->ino);
        sqlite3_bind_int64(s, 2, (int64_t)st->dev);
        int rc = sqlite3_step(s);
        int64_t leader = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return mf_db_fail(m, "read");
        *hl = leader && leader != self ? leader : MF_HL_LEADER;
        return 0;
}

int mf_regroup(struct ferry_manifest *m, const struct ferry_stat *st,
               int64_t done, int64_t leader, int64_t gen, bool *swapped)
{
        *swapped = false;
        /* not yet handed out: the first pass has not reached it */
        if (leader <= m->first_pass_at)
                return 0;
        sqlite3_stmt *s = STMT(S_NEW_LEADER);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, leader);
        sqlite3_bind_int64(s, 2, gen);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return mf_db_fail(m, "read");
        /* the new first name and its other names follow done */
        if (!(s = STMT(S_ELECT_SET)))
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, (int64_t)st->ino);
        sqlite3_bind_int64(s, 2, (int64_t)st->dev);
        sqlite3_bind_int64(s, 3, done);
        sqlite3_bind_int64(s, 4, leader);
        rc = mf_exec_stmt(m, s, "file update");
        *swapped = rc == 0;
        return rc;
}

/* A removed or vanished first name with no other name to take over: no
 * longer a first name, so later scans do not elect for it again. */
static int forget_group(struct ferry_manifest *m, int64_t old)
{
        return mf_exec_id(m, STMT(S_FORGET_GROUP), old, "file update");
}

/* One hardlink group: a new first name for the followers of old, the
 * group's other first name if the scan already made one (a name seen after
 * old was known to be gone), else the lowest follower. */
static int elect(struct ferry_manifest *m, int64_t old)
{
        sqlite3_stmt *s = STMT(S_ELECT_FIND);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, old);
        int rc = sqlite3_step(s);
        int64_t ino = 0, dev = 0, leader = 0;
        if (rc == SQLITE_ROW) {
                ino = sqlite3_column_int64(s, 0);
                dev = sqlite3_column_int64(s, 1);
                leader = sqlite3_column_int64(s, 2); /* NULL: 0, none */
        }
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return mf_db_fail(m, "read");
        if (rc == SQLITE_ROW && !leader)
                return forget_group(m, old);
        if (!leader)
                return 0;
        /* the new first name is copied with data, the old one becomes a
         * follower (linked to it when it is copied again), and so do the
         * other names */
        if (!(s = STMT(S_ELECT_SET)))
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, ino);
        sqlite3_bind_int64(s, 2, dev);
        sqlite3_bind_int64(s, 3, leader);
        sqlite3_bind_int64(s, 4, old);
        return mf_exec_stmt(m, s, "file update");
}

int mf_elect_leader(struct ferry_manifest *m, int64_t id)
{
        return elect(m, id);
}

int mf_elect_leaders(struct ferry_manifest *m)
{
        int64_t cursor = 0;
        int rc = 0;
        while (!rc) {
                sqlite3_stmt *s = STMT(S_NEXT_GONE_LEADER);
                if (!s)
                        return mf_db_fail(m, "read");
                sqlite3_bind_int64(s, 1, cursor);
                int step = sqlite3_step(s);
                if (step != SQLITE_ROW ||
                    sqlite3_column_type(s, 0) == SQLITE_NULL) {
                        sqlite3_reset(s);
                        rc = step == SQLITE_ROW || step == SQLITE_DONE
                                     ? 0
                                     : mf_db_fail(m, "read");
                        break;
                }
                cursor = sqlite3_column_int64(s, 0);
                sqlite3_reset(s);
                rc = elect(m, cursor);
        }
        return rc;
}

int mf_relink_followers(struct ferry_manifest *m, const struct ferry_item *it,
                        bool *any)
{
        if (it->type == FT_LINK || it->st.nlink < 2 || it->link_off)
                return 0;
        sqlite3_stmt *s = STMT(S_RELINK);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, it->id);
        sqlite3_bind_int64(s, 2, (int64_t)it->st.ino);
        sqlite3_bind_int64(s, 3, (int64_t)it->st.dev);
        int rc = mf_exec_stmt(m, s, "file update");
        if (!rc && sqlite3_changes(m->db) > 0)
                *any = true;
        return rc;
}
