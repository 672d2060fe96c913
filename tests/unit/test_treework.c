/*
 * test_treework.c - the end-of-run tree work (src/treework.h) on a real
 * directory tree (FERRY_TREE_POOL=1: the pool from the first job, as on a
 * slow DST): directories' metadata applied by 8 idle copy workers
 * (and by the calling thread: -j 1, no pool) ends up right on every
 * directory, children first;
 * nested directories are all removed (a parent's rmdir after its
 * children's); every job comes back once, in the order it was added; a
 * done callback that says stop gets nothing more; a job keeps its own
 * copy of the directory row (the walk's chunk is gone when it runs);
 * the probe's verdict on the calling thread's jobs.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "treework.h"
#include "workers.h"

#include <fcntl.h>
#include <sys/stat.h>

#define FANOUT  4
#define DEPTH   4
#define MAXDIRS 400

struct fixture {
        char dir[PATH_MAX];
        int src, dst;
        char *paths[MAXDIRS]; /* parents before children, as row ids */
        size_t n;
};

static void add_level(struct fixture *fx, const char *parent, int depth)
{
        for (int i = 0; depth <= DEPTH && i < FANOUT && fx->n < MAXDIRS; i++) {
                char p[256];
                snprintf(p, sizeof(p), "%s%sd%d", parent, *parent ? "/" : "",
                         i);
                fx->paths[fx->n++] = strdup(p);
        }
}

static void setup(struct fixture *fx, bool make_in_dst)
{
        memset(fx, 0, sizeof(*fx));
        unit_tmpdir(fx->dir, "treework");
        int top = open(fx->dir, O_RDONLY | O_DIRECTORY);
        CHECK(top >= 0);
        CHECK_EQ(mkdirat(top, "src", 0755), 0);
        CHECK_EQ(mkdirat(top, "dst", 0755), 0);
        fx->src = openat(top, "src", O_RDONLY | O_DIRECTORY);
        fx->dst = openat(top, "dst", O_RDONLY | O_DIRECTORY);
        close(top);
        add_level(fx, "", 1);
        for (size_t i = 0; i < fx->n; i++) {
                int depth = 1;
                for (const char *c = fx->paths[i]; *c; c++)
                        depth += *c == '/';
                add_level(fx, fx->paths[i], depth + 1);
        }
        for (size_t i = 0; i < fx->n; i++) {
                CHECK_EQ(mkdirat(fx->src, fx->paths[i], 0755), 0);
                if (make_in_dst)
                        CHECK_EQ(mkdirat(fx->dst, fx->paths[i], 0755), 0);
        }
}

static void teardown(struct fixture *fx)
{
        for (size_t i = 0; i < fx->n; i++)
                free(fx->paths[i]);
        close(fx->src);
        close(fx->dst);
        unit_rmtree(fx->dir);
}

struct seen {
        int64_t ids[MAXDIRS];
        int rcs[MAXDIRS];
        size_t n, stop_at;
};

static bool on_done(void *ctx, const struct ferry_tree_job *t)
{
        struct seen *s = ctx;
        if (s->n < MAXDIRS) {
                s->ids[s->n] = t->row.id;
                s->rcs[s->n] = t->rc;
        }
        s->n++;
        return s->n != s->stop_at;
}

/* A pool of n copy workers, idle (its work queue closed), as the coordinator
 * leaves it for the tree work; NULL for n == 0. */
struct pool {
        struct ferry_queue work, inbox;
        atomic_bool stop;
        struct ferry_workers *w;
};

static void pool_start(struct pool *p, const struct fixture *fx, unsigned n)
{
        memset(p, 0, sizeof(*p));
        CHECK_EQ(ferry_queue_init(&p->work, 4), 0);
        CHECK_EQ(ferry_queue_init(&p->inbox, 4), 0);
        if (!n)
                return;
        struct ferry_copy_cfg cc = {
                .srcfd = fx->src, .dstfd = fx->dst, .stop = &p->stop};
        CHECK_EQ(ferry_workers_start(&cc, n, n, &p->work, &p->inbox, &p->w), 0);
        CHECK_EQ(ferry_workers_count(p->w), 0); /* threads start on demand */
        CHECK_EQ(ferry_workers_want(p->w, n), 0);
        CHECK_EQ(ferry_workers_count(p->w), n);
        ferry_queue_close(&p->work);
        ferry_workers_idle(p->w);
}

static void pool_end(struct pool *p)
{
        ferry_workers_join(p->w);
        ferry_queue_release(&p->work);
        ferry_queue_release(&p->inbox);
}

static struct ferry_time mtime_of(size_t i)
{
        return (struct ferry_time){1500000000 + (int64_t)i * 11,
                                   (uint32_t)(i * 7919 % 1000000000)};
}

/* Adds one job per directory, children first (descending row ids), as
 * the manifest's walk gives them: rows and paths in a chunk that is
 * scribbled over and freed once the jobs are added (the walk's storage is
 * valid until its next chunk only), while the jobs still run. */
static void add_all(struct fixture *fx, struct ferry_treework *tw,
                    enum ferry_tree_op op)
{
        for (size_t k = fx->n; k-- > 0;) {
                size_t len = strlen(fx->paths[k]);
                char *path = malloc(len + 1);
                struct ferry_dir_row *d = malloc(sizeof(*d));
                CHECK(path != NULL && d != NULL);
                memcpy(path, fx->paths[k], len + 1);
                *d = (struct ferry_dir_row){.id = (int64_t)k + 1,
                                            .parent = 0,
                                            .path = path,
                                            .path_len = len,
                                            .mode = S_IFDIR |
                                                    (k % 2 ? 0750 : 0755),
                                            .mtime = mtime_of(k)};
                CHECK_EQ(ferry_treework_add_dir(tw, op, false, d), 0);
                memset(path, 'x', len);
                memset(d, 0xa5, sizeof(*d));
                free(path);
                free(d);
        }
}

static void check_order(const struct fixture *fx, const struct seen *s)
{
        CHECK_EQ(s->n, fx->n);
        bool in_order = true, all_ok = true;
        for (size_t i = 0; i < s->n && i < MAXDIRS; i++) {
                in_order &= s->ids[i] == (int64_t)(fx->n - i);
                all_ok &= s->rcs[i] == 0;
        }
        CHECK(in_order);
        CHECK(all_ok);
}

/* The tree work's configuration of the apply tests: modes and times. */
static struct ferry_tree_cfg apply_cfg(const struct fixture *fx)
{
        return (struct ferry_tree_cfg){.srcfd = fx->src,
                                       .dstfd = fx->dst,
                                       .meta = {.perms = true,
                                                .times = true,
                                                .root = geteuid() == 0,
                                                .umask = 022}};
}

static void apply_with(unsigned jobs)
{
        struct fixture fx;
        setup(&fx, false);
        struct ferry_tree_cfg cfg = apply_cfg(&fx);
        struct seen s = {0};
        struct ferry_treework *tw = NULL;
        struct pool pool;
        pool_start(&pool, &fx, jobs);
        CHECK_EQ(ferry_treework_new(&cfg, pool.w, on_done, &s, &tw), 0);
        add_all(&fx, tw, TREE_APPLY_DIR);
        ferry_treework_drain(tw);
        CHECK_EQ(ferry_treework_pending(tw), 0);
        ferry_treework_free(tw);
        pool_end(&pool);
        check_order(&fx, &s);
        size_t wrong = 0;
        for (size_t k = 0; k < fx.n; k++) {
                struct stat st;
                struct ferry_time want = mtime_of(k);
                if (fstatat(fx.dst, fx.paths[k], &st, AT_SYMLINK_NOFOLLOW) ||
                    st.st_mtim.tv_sec != want.sec ||
                    st.st_mtim.tv_nsec != (long)want.nsec ||
                    (st.st_mode & 07777) != (k % 2 ? 0750u : 0755u))
                        wrong++;
        }
        CHECK_EQ(wrong, 0);
        teardown(&fx);
}

static void test_apply_parallel(void)
{
        apply_with(8);
}

static void test_apply_inline(void)
{
        apply_with(1); /* one worker: the calling thread does the work */
        apply_with(0); /* no pool */
}

static void test_delete_nested(void)
{
        struct fixture fx;
        setup(&fx, true);
        struct ferry_tree_cfg cfg = {.srcfd = fx.src, .dstfd = fx.dst};
        struct seen s = {0};
        struct ferry_treework *tw = NULL;
        struct pool pool;
        pool_start(&pool, &fx, 8);
        CHECK_EQ(ferry_treework_new(&cfg, pool.w, on_done, &s, &tw), 0);
        add_all(&fx, tw, TREE_DEL_DIR);
        ferry_treework_free(tw); /* drains */
        pool_end(&pool);
        check_order(&fx, &s);
        size_t left = 0;
        for (size_t k = 0; k < fx.n; k++) {
                struct stat st;
                left += fstatat(fx.dst, fx.paths[k], &st, 0) == 0;
        }
        CHECK_EQ(left, 0);
        teardown(&fx);
}

static void test_stop(void)
{
        struct fixture fx;
        setup(&fx, true);
        struct ferry_tree_cfg cfg = {.srcfd = fx.src, .dstfd = fx.dst};
        struct seen s = {.stop_at = 5};
        struct ferry_treework *tw = NULL;
        struct pool pool;
        pool_start(&pool, &fx, 8);
        CHECK_EQ(ferry_treework_new(&cfg, pool.w, on_done, &s, &tw), 0);
        add_all(&fx, tw, TREE_DEL_DIR);
        ferry_treework_drain(tw);
        CHECK_EQ(ferry_treework_pending(tw), 0);
        ferry_treework_free(tw);
        pool_end(&pool);
        CHECK_EQ(s.n, 5);
        teardown(&fx);
}

/* A shared job's metadata pass makes one tree work per claim on the same
 * pool: the threads that served the first serve the next (they used to
 * return after one, and the second waited for ever: a hang, which the
 * test's timeout reports). */
static void test_pool_serves_again(void)
{
        struct fixture fx;
        setup(&fx, false);
        struct ferry_tree_cfg cfg = apply_cfg(&fx);
        struct pool pool;
        pool_start(&pool, &fx, 4);
        for (int round = 0; round < 3; round++) {
                struct seen s = {0};
                struct ferry_treework *tw = NULL;
                CHECK_EQ(ferry_treework_new(&cfg, pool.w, on_done, &s, &tw), 0);
                add_all(&fx, tw, TREE_APPLY_DIR);
                ferry_treework_drain(tw);
                CHECK_EQ(ferry_treework_pending(tw), 0);
                ferry_treework_free(tw);
                check_order(&fx, &s);
        }
        pool_end(&pool);
        teardown(&fx);
}

/* The probe hands the jobs to the pool as soon as its time passes its
 * budget (32 jobs of 0.3 ms), not after its 32nd job: a SRC or DST at
 * 5 ms a round trip gets the pool after 2 directories, not 32. */
static void test_probe(void)
{
        const long long ms = 1000000;
        CHECK_EQ(ferry_treework_probe(ms / 10, 1), PROBE_GOING);
        CHECK_EQ(ferry_treework_probe(31 * ms / 10, 31), PROBE_GOING);
        CHECK_EQ(ferry_treework_probe(32 * ms / 10, 32), PROBE_FAST);
        CHECK_EQ(ferry_treework_probe(5 * ms, 1), PROBE_GOING);
        CHECK_EQ(ferry_treework_probe(10 * ms, 2), PROBE_SLOW);
        CHECK_EQ(ferry_treework_probe(10 * ms, 32), PROBE_SLOW);
        CHECK_EQ(ferry_treework_probe(96 * ms / 10, 3), PROBE_SLOW);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        setenv("FERRY_TREE_POOL", "1", 1); /* the pool even on a fast disk */
        RUN(test_apply_parallel);
        RUN(test_apply_inline);
        RUN(test_delete_nested);
        RUN(test_stop);
        RUN(test_pool_serves_again);
        RUN(test_probe);
        return unit_done();
}
