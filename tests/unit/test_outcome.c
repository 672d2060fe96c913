/*
 * test_outcome.c - the coordinator's outcome recording (src/coord/barrier.c)
 * without threads: rule 1 (a copied row becomes done only after its
 * barrier succeeded, and with the COMMIT that follows), a failed barrier
 * leaving its rows pending and the run noted uncertain, a failed hardlink
 * leader handing its group to a follower, and a full DST stopping the run
 * (phase STOPPING) with its row pending, and set_phase refusing an arrow
 * the phase diagram does not have. The test plays the barrier
 * thread: it pops the barrier job and answers it. The manifest (MF_MEMORY)
 * is the oracle.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "coord/internal.h"
#include "manifest.h"
#include "manifest/internal.h" /* the rows a test starts from */

#include <signal.h>

struct fixture {
        char dir[PATH_MAX]; /* DST */
        struct ferry_options opt;
        struct ferry_coord_cfg cfg;
        struct ferry_summary sum;
        struct ferry_error err;
        atomic_bool stop;
        struct coord c;
        int64_t root;
        int warnings;
        struct ferry_failure failed; /* of the last FERRY_EV_FAILED */
};

static void on_event(enum ferry_event ev, const char *path, size_t len,
                     const char *detail, const struct ferry_failure *fail,
                     void *arg)
{
        struct fixture *fx = arg;
        (void)path, (void)len, (void)detail;
        if (ev == FERRY_EV_WARNING)
                fx->warnings++;
        if (ev == FERRY_EV_FAILED)
                fx->failed = fail ? *fail : (struct ferry_failure){0};
}

static void fx_open(struct fixture *fx)
{
        memset(fx, 0, sizeof(*fx));
        unit_tmpdir(fx->dir, "outcome");
        fx->opt.jobs = 2;
        fx->opt.durability = FERRY_DURABLE_BATCH;
        fx->opt.hard_links = true;
        fx->opt.event = on_event;
        fx->opt.cb_arg = fx;
        fx->opt.dst = fx->dir;
        CHECK_EQ(ferry_manifest_open("unused", MF_MEMORY | MF_CREATE,
                                     &fx->cfg.m, &fx->err),
                 0);
        CHECK_EQ(ferry_manifest_bind_job(fx->cfg.m, "/the/src", fx->dir), 0);
        fx->cfg.srcfd = -1;
        fx->cfg.dstfd = open(fx->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fx->cfg.dstfd >= 0);
        fx->cfg.opt = &fx->opt;
        fx->cfg.stop = &fx->stop;
        fx->cfg.command = "test";
        struct coord *c = &fx->c;
        CHECK_EQ(coord_init(c, &fx->cfg, &fx->sum, &fx->err, WORK_COPY), 0);
        c->bar.started = true; /* the test is the barrier thread: none */
        struct ferry_stat dir;
        memset(&dir, 0, sizeof(dir));
        dir.mode = S_IFDIR | 0755;
        bool is_new, marking;
        CHECK_EQ(ferry_manifest_begin(c->m), 0);
        CHECK_EQ(mf_next_gen(c->m, &c->gen), 0);
        CHECK_EQ(mf_dir_upsert(c->m, "", 0, &dir, c->gen, &fx->root, &is_new,
                               &marking),
                 0);
}

static void fx_close(struct fixture *fx)
{
        coord_release(&fx->c);
        ferry_manifest_close(fx->cfg.m);
        close(fx->cfg.dstfd);
        unit_rmtree(fx->dir);
}

static int64_t add_file(struct fixture *fx, const char *name, uint64_t ino,
                        uint32_t nlink)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = S_IFREG | 0644;
        st.size = 10;
        st.mtime = (struct ferry_time){5000, 0};
        st.dev = 7;
        st.ino = ino;
        st.nlink = nlink;
        struct ferry_entry_rec rec;
        CHECK_EQ(mf_file_upsert(fx->c.m, fx->root, false, true, name,
                                strlen(name), &st, fx->c.gen, true, &rec),
                 0);
        return rec.id;
}

/* The rows committed, the scan over: pass 1 hands out a batch, as refill
 * would, and every item comes back with result r. */
static struct ferry_batch *hand_out(struct fixture *fx, enum ferry_result r)
{
        struct coord *c = &fx->c;
        CHECK_EQ(ferry_manifest_commit(c->m), 0);
        CHECK_EQ(ferry_manifest_begin(c->m), 0);
        set_phase(c, PH_SCANNING);
        struct ferry_batch *b = NULL;
        CHECK_EQ(handout_next(&c->ho, c->m, c->gen, false, &c->phase, &b), 0);
        CHECK(b != NULL);
        if (!b)
                return NULL;
        c->ho.in_flight++;
        c->ho.outstanding += b->n;
        for (size_t i = 0; i < b->n; i++) {
                struct ferry_item *it = &b->items[i];
                it->result = r;
                it->bytes = r == R_DONE ? it->st.size : 0;
                it->err = r == R_DONE ? 0 : r == R_NOSPACE ? ENOSPC : EACCES;
                it->fail = (struct ferry_failure){
                        r == R_DONE ? FERRY_SIDE_NONE : FERRY_SIDE_SRC,
                        r == R_DONE ? FERRY_STEP_NONE : FERRY_STEP_OPEN,
                        it->err};
        }
        return b;
}

/* Plays the barrier thread: takes the job maybe_barrier started and
 * answers it with err, as barrier_main would. */
static struct barrier_job *barrier_answer(struct fixture *fx, int err)
{
        void *p = NULL;
        CHECK_EQ(ferry_queue_try_pop(&fx->c.bar.q, &p), FERRY_QUEUE_OK);
        struct barrier_job *job = p;
        if (job)
                job->msg.err = err;
        return job;
}

static uint64_t done_rows(struct fixture *fx)
{
        uint64_t n = 0;
        CHECK_EQ(ferry_manifest_count(fx->c.m, COUNT_DONE, 0, &n, NULL), 0);
        return n;
}

static void test_done_only_after_the_barrier(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct coord *c = &fx.c;
        add_file(&fx, "a", 100, 1);
        add_file(&fx, "b", 200, 1);
        struct ferry_batch *b = hand_out(&fx, R_DONE);
        CHECK_EQ(b ? b->n : 0, 2);
        on_batch(c, b);
        /* the results wait for their barrier: nothing is done yet */
        CHECK_EQ(done_rows(&fx), 0);
        CHECK(!all_committed(c));
        maybe_barrier(c); /* nothing in flight: it starts at once */
        CHECK(c->bar.running != NULL);
        CHECK_EQ(done_rows(&fx), 0);
        struct barrier_job *job = barrier_answer(&fx, 0);
        if (job)
                on_barrier(c, job);
        CHECK_EQ(done_rows(&fx), 2);
        CHECK(all_committed(c));
        CHECK_EQ(c->ho.outstanding, 0);
        CHECK_EQ(fx.sum.files_copied, 2);
        /* and committed: a rollback now keeps them done */
        CHECK_EQ(ferry_manifest_rollback(c->m), 0);
        CHECK_EQ(done_rows(&fx), 2);
        CHECK_EQ(ferry_manifest_begin(c->m), 0);
        CHECK_EQ(c->phase, PH_SCANNING);
        fx_close(&fx);
}

static void test_failed_barrier_keeps_rows_pending(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct coord *c = &fx.c;
        add_file(&fx, "a", 100, 1);
        on_batch(c, hand_out(&fx, R_DONE));
        maybe_barrier(c);
        struct barrier_job *job = barrier_answer(&fx, EIO);
        if (job)
                on_barrier(c, job);
        CHECK_EQ(done_rows(&fx), 0); /* copied again later */
        CHECK(c->bar.failed);
        CHECK_EQ(fx.warnings, 1);
        CHECK_EQ(c->stop_code, 0); /* DST answers: the run goes on */
        CHECK_EQ(c->phase, PH_SCANNING);
        char since[32] = "";
        CHECK_EQ(ferry_manifest_note(c->m, UNCERTAIN_KEY, since, sizeof(since)),
                 0);
        CHECK(since[0] != '\0');
        fx_close(&fx);
}

static void test_failed_leader_hands_over(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct coord *c = &fx.c;
        int64_t a = add_file(&fx, "a", 100, 2); /* leader */
        int64_t f = add_file(&fx, "f", 100, 2); /* follower */
        struct ferry_batch *b = hand_out(&fx, R_FAILED);
        CHECK_EQ(b ? b->n : 0, 1);
        CHECK_EQ(b && b->n ? b->items[0].id : 0, a);
        on_batch(c, b);
        maybe_barrier(c);
        struct barrier_job *job = barrier_answer(&fx, 0);
        if (job)
                on_barrier(c, job);
        CHECK_EQ(fx.sum.files_failed, 1);
        /* the event carries the worker's failure, as data */
        CHECK_EQ(fx.failed.side, FERRY_SIDE_SRC);
        CHECK_EQ(fx.failed.step, FERRY_STEP_OPEN);
        CHECK_EQ(fx.failed.err, EACCES);
        CHECK(!c->fresh); /* the election was committed with the rest */
        /* the follower is copied on its own now, with its data */
        struct ferry_batch *next = ferry_batch_new(WORK_COPY, 8);
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, PASS_COPY_NEXT, c->gen);
        CHECK_EQ(ferry_manifest_handout(c->m, &h, next, 8, UINT64_MAX), 0);
        CHECK_EQ(next->n, 1);
        CHECK_EQ(next->n ? next->items[0].id : 0, f);
        CHECK_EQ(next->n ? next->items[0].link_off : 1, 0);
        ferry_batch_free(next);
        fx_close(&fx);
}

static void test_full_dst_stops_the_run(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct coord *c = &fx.c;
        add_file(&fx, "a", 100, 1);
        on_batch(c, hand_out(&fx, R_NOSPACE));
        /* at once, not after the barrier */
        CHECK_EQ(c->stop_code, FERRY_ENOSPC);
        CHECK_EQ(c->phase, PH_STOPPING);
        CHECK(atomic_load(&fx.stop));
        maybe_barrier(c);
        struct barrier_job *job = barrier_answer(&fx, 0);
        if (job)
                on_barrier(c, job);
        CHECK_EQ(done_rows(&fx), 0);
        CHECK_EQ(fx.sum.files_failed, 0); /* never recorded */
        CHECK(all_committed(c));
        fx_close(&fx);
}

/* set_phase refuses an arrow the diagram lacks: the run stops at once
 * (abort, in testing builds) instead of going on in a state no code
 * expects. */
static void test_phase_arrows_are_checked(void)
{
        if (!COORD_CHECKS) {
                fprintf(stderr, "SKIP test_phase_arrows_are_checked: a "
                                "release build without FERRY_TESTING has "
                                "no checks\n");
                atomic_fetch_add(&unit_skipped, 1);
                return;
        }
        struct fixture fx;
        fx_open(&fx);
        set_phase(&fx.c, PH_SCANNING); /* an arrow: fine */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 2); /* the abort's message is expected */
                set_phase(&fx.c, PH_FINISHING); /* not an arrow */
                _exit(0);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
        fx_close(&fx);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_done_only_after_the_barrier);
        RUN(test_failed_barrier_keeps_rows_pending);
        RUN(test_failed_leader_hands_over);
        RUN(test_full_dst_stops_the_run);
        RUN(test_phase_arrows_are_checked);
        return unit_done();
}
