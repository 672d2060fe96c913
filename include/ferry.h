/*
 * ferry.h - the public contract of libferry.
 *
 * ferry copies a directory tree SRC into DST and journals every file in an
 * SQLite manifest, so that an interrupted copy resumes, a re-run copies only
 * what changed and a finished copy can be verified from the manifest alone.
 *
 * Calling sequence:
 *
 *   struct ferry_options opt;
 *   ferry_options_init(&opt);               // defaults
 *   opt.src = "..."; opt.dst = "...";        // borrowed, must outlive the job
 *   struct ferry_job *job;
 *   struct ferry_error err;
 *   int rc = ferry_job_open(&opt, &job, &err);   // resolves paths, locks
 *   if (rc == FERRY_OK)
 *           rc = ferry_job_run(job, &summary, &err);   // or ferry_job_verify
 *   ferry_job_close(job);
 *
 * Every function returns one of enum ferry_code (0 = success). The numbers are
 * the command line's exit codes and are never renumbered.
 */
#ifndef FERRY_H
#define FERRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERRY_VERSION "1.0.0"

/* Result codes; also the exit codes of the ferry command (man/ferry.1). */
enum ferry_code {
        FERRY_OK = 0,        /* everything copied (or verified) */
        FERRY_EUSAGE = 1,    /* bad option or argument */
        FERRY_EPATH = 2,     /* SRC or DST unusable */
        FERRY_EMANIFEST = 3, /* manifest corrupt, foreign, too new or failing */
        FERRY_ELOCKED = 4,   /* another run holds the job */
        FERRY_EVERIFY = 5,   /* verify found missing or mismatched files */
        FERRY_EINTERNAL = 6, /* out of memory, thread creation failed */
        FERRY_EOUTPUT = 7,   /* cannot write standard output (full, broken
                              * pipe); a run stopped, resumable */
        FERRY_ENOSPC = 11,   /* destination full; stopped */
        FERRY_EDSTFAIL = 12, /* destination failed mid-run (gone, I/O errors,
                                read-only); stopped, rows pending */
        FERRY_EINTR = 20,    /* interrupted by a signal; resumable */
        FERRY_EPARTIAL = 23, /* some files failed */
        FERRY_EVANISHED = 24, /* only failure: source files vanished */
        FERRY_EDELETE = 25,   /* --delete refused (SRC looks replaced or
                                 emptied) or stopped by --max-delete */
        FERRY_EMETA = 26,     /* only shortfall: every file's data arrived,
                                 but some metadata (owner, mode, times,
                                 xattrs, ACLs) could not be applied where
                                 DST should hold it */
};

enum ferry_durability {
        FERRY_DURABLE_BATCH = 0, /* syncfs + fsync of touched dirs per batch */
        FERRY_DURABLE_FILE,      /* fsync every file, then its directory */
        FERRY_DURABLE_NONE,      /* trust the OS */
};

enum ferry_verify_mode {
        FERRY_VERIFY_DEST = 1,
        FERRY_VERIFY_SOURCE = 2,
        FERRY_VERIFY_BOTH = 3,
};

/* One line of human-readable diagnostic. */
struct ferry_error {
        char msg[1024];
};

/* A snapshot handed to the progress callback, about once per second. */
struct ferry_progress {
        uint64_t files_total; /* entries known so far (scan may still run) */
        uint64_t files_done;  /* finished (copied, skipped, failed) */
        uint64_t bytes_total; /* bytes to copy in this run, known so far */
        uint64_t bytes_done;
        /* of bytes_done, the chunks of large files that earlier runs
         * copied (a resume counts them done at once): not in a rate */
        uint64_t bytes_resumed;
        uint64_t errors;
        double elapsed; /* seconds since the run started */
        bool scanning;  /* the scan has not finished yet */
        bool final;     /* last call of the run */
        /* live control (`ferry set`, --window): the run hands nothing out
         * and its copies wait; resume_at: the minute of the day (local
         * time) the window opens, -1 when `ferry set --resume` ends it */
        bool paused;
        int resume_at;
};

/* What happened to one file, for --verbose listings and --log-file. path
 * is borrowed and relative to SRC and DST; "." is the top directory (SRC
 * or DST) itself. Every event is handed on whatever the caller prints (a
 * log sees them all); the numbers are never renumbered. */
enum ferry_event {
        FERRY_EV_COPIED = 1,
        FERRY_EV_DELETED,
        FERRY_EV_FAILED,
        FERRY_EV_VANISHED,
        FERRY_EV_SKIPPED,
        FERRY_EV_MISMATCH,     /* verify: content differs */
        FERRY_EV_MISSING,      /* verify: file is missing */
        FERRY_EV_WOULD_COPY,   /* dry run */
        FERRY_EV_WOULD_DELETE, /* dry run; with a detail: kept, and why
                                  (--max-delete, a refused --delete) */
        FERRY_EV_WARNING,      /* path may be empty; detail says what */
        FERRY_EV_META,         /* metadata alone applied in place */
        FERRY_EV_META_FAILED,  /* data arrived, metadata did not: fail */
        FERRY_EV_META_DIFFERS, /* verify: metadata differs; detail says what */
        FERRY_EV_LINKED,       /* made as a hard link to its first name */
        FERRY_EV_VERIFIED,     /* verify: content (and metadata) as recorded */
        FERRY_EV_META_FAILED_MORE, /* as FERRY_EV_META_FAILED, beyond the
                                      first few of its cause (a listing
                                      names those; one warning at the end
                                      counts the rest): for a log */
        FERRY_EV_ADOPTED,          /* --adopt: DST's entry found equal, kept */
        FERRY_EV_WOULD_ADOPT,      /* dry run, --adopt: DST holds a file of
                                      the size and mtime (not read) */
        FERRY_EV_WOULD_META,       /* dry run: metadata alone would be
                                      applied in place */
};

/*
 * A failure is data: which tree it happened on, the step that failed and
 * the errno. Decisions (which directory a message names, whether a run
 * stops) go by these fields, never by the words of a message; `ferry
 * status` groups failures by them. The numbers are stored in the manifest
 * (sql/005_failure.sql) and are never renumbered.
 */
enum ferry_side {
        FERRY_SIDE_NONE = 0, /* not recorded (a row of an older ferry) */
        FERRY_SIDE_SRC = 1,
        FERRY_SIDE_DST = 2,
        FERRY_SIDE_MANIFEST = 3,
};

enum ferry_step {
        FERRY_STEP_NONE = 0,
        /* system calls; err says how they failed */
        FERRY_STEP_OPEN = 1,     /* open a file */
        FERRY_STEP_OPENDIR = 2,  /* open a directory */
        FERRY_STEP_READDIR = 3,  /* list a directory */
        FERRY_STEP_STAT = 4,     /* stat, fstat, statx */
        FERRY_STEP_READ = 5,     /* read a file's data */
        FERRY_STEP_READLINK = 6, /* read a symlink's target */
        FERRY_STEP_MKDIR = 7,    /* make a directory */
        FERRY_STEP_CREATE = 8,   /* create a file (the temp file) */
        FERRY_STEP_SYMLINK = 9,  /* create a symlink */
        FERRY_STEP_WRITE = 10,   /* write a file's data */
        FERRY_STEP_FSYNC = 11,
        FERRY_STEP_CLOSE = 12,
        FERRY_STEP_CHOWN = 13,
        FERRY_STEP_CHMOD = 14,
        FERRY_STEP_UTIMES = 15,
        FERRY_STEP_LCHOWN = 16,     /* a symlink's owner */
        FERRY_STEP_LUTIMES = 17,    /* a symlink's times */
        FERRY_STEP_LINK = 18,       /* hard link to the first name */
        FERRY_STEP_RENAME = 19,     /* rename into place */
        FERRY_STEP_VERIFY = 20,     /* verify: read and hash */
        FERRY_STEP_COPY = 21,       /* a copy as a whole (stopped) */
        FERRY_STEP_CLEAR = 22,      /* look at or remove what is in the way */
        FERRY_STEP_XATTR_READ = 23, /* list or read SRC's xattrs (and ACLs) */
        FERRY_STEP_XATTR = 24,      /* set an xattr in DST */
        FERRY_STEP_ACL = 25,        /* set an ACL (system.posix_acl_*) */
        FERRY_STEP_MKNOD = 26,      /* make a FIFO, socket or device */
        /* refusals and findings; err is 0 and a detail says more */
        FERRY_STEP_CHANGED = 40,      /* SRC kept changing while copied */
        FERRY_STEP_NAME = 41,         /* a name DST cannot hold, or one taken
                                         there by another spelling */
        FERRY_STEP_NOT_OURS = 42,     /* an entry in DST that is not ferry's is
                                         in the way: not replaced (rule 9) */
        FERRY_STEP_MISSING = 43,      /* verify: not there */
        FERRY_STEP_DIFFERS = 44,      /* verify: other content */
        FERRY_STEP_TOO_BIG = 45,      /* larger than DST can hold (FAT32) */
        FERRY_STEP_META_DIFFERS = 46, /* verify: other metadata */
};

struct ferry_failure {
        enum ferry_side side;
        enum ferry_step step;
        int err; /* errno, or 0 for a refusal or finding */
};

/* Writes f as English into buf (size > 0), for example "permission denied
 * reading SRC" or "SRC changed while copied"; returns buf. */
char *ferry_failure_str(const struct ferry_failure *f, char *buf, size_t size);
/* The cause f groups under: the same for two failures exactly when side,
 * step and err agree, and stable across versions (it is made of the
 * numbers above), for example "src:read:13". Returns buf. */
char *ferry_failure_key(const struct ferry_failure *f, char *buf, size_t size);
/* "SRC", "DST", "manifest" or "": static. */
const char *ferry_side_str(enum ferry_side side);
/* The step's short name ("read", "rename", "name", ...), "" for
 * FERRY_STEP_NONE or an unknown number: static. */
const char *ferry_step_str(enum ferry_step step);

typedef void (*ferry_progress_fn)(const struct ferry_progress *p, void *arg);
/* fail: what failed, for FERRY_EV_FAILED and for the warnings that are
 * failures (a directory the scan could not read); NULL for the rest.
 * Borrowed, like path and detail. */
typedef void (*ferry_event_fn)(enum ferry_event ev, const char *path,
                               size_t path_len, const char *detail,
                               const struct ferry_failure *fail, void *arg);

/* One --include or --exclude rule (pattern.h says the syntax). */
struct ferry_filter_rule {
        const char *pattern; /* borrowed */
        bool include;
};

struct ferry_options {
        const char *src;             /* borrowed */
        const char *dst;             /* borrowed */
        const char *manifest;        /* borrowed; NULL = default location */
        const char *const *excludes; /* borrowed array of n_excludes: exclude
                                        rules tried after filters */
        size_t n_excludes;
        /* --include/--exclude in command-line order, first match wins */
        const struct ferry_filter_rule *filters; /* borrowed, n_filters */
        size_t n_filters;
        const char *files_from; /* --files-from FILE ("-": stdin); NULL */
        bool from0;             /* --from0: its names end in NUL */
        int64_t min_size;       /* --min-size: smaller regular files are
                                   left out; -1 = none */
        int64_t max_size;       /* --max-size: larger ones; -1 = none */
        unsigned jobs;     /* copies in flight; 0: auto (tuned as it goes) */
        unsigned scanners; /* scan threads */
        unsigned retries;  /* per file, transient errors/changes */
        enum ferry_durability durability;
        enum ferry_verify_mode verify; /* 0: a copy job; else verify only */
        bool delete_removed;           /* --delete */
        bool delete_anyway;            /* --delete-anyway: also when SRC looks
                                          replaced or emptied (needs delete_removed) */
        int64_t max_delete; /* --max-delete: at most this many entries
                               deleted per run; -1 = no limit */
        bool dry_run;
        bool hard_links;
        bool perms;
        bool owner;
        bool times;
        bool xattrs;                /* every namespace the process may use,
                                       capabilities included (not ACLs) */
        bool acls;                  /* POSIX ACLs, access and default */
        bool specials;              /* FIFOs and sockets */
        bool devices;               /* character and block devices (root) */
        bool atimes;                /* --atimes: access times too */
        bool trust_mtime;           /* --trust-mtime: a change of ctime alone is
                                       not a reason to re-read SRC */
        bool one_file_system;       /* -x: do not cross mount points in SRC */
        ferry_progress_fn progress; /* may be NULL */
        ferry_event_fn event;       /* may be NULL */
        void *cb_arg;
        /* live control's run options (`ferry set` changes them for the
         * running job only): bytes per second, 0 no limit; the window of
         * allowed hours, minutes after local midnight, -1 none (it may
         * wrap midnight: start > end) */
        uint64_t bwlimit;
        int window_start, window_end;
        /* --adopt: a file or symlink to be copied that DST already holds,
         * of SRC's type, size and (with times) mtime, is read and hashed
         * on both sides and, equal, recorded as done without a copy; a
         * manifest of other SRC and DST paths is pointed at these */
        bool adopt;
        /* a shared manifest (manifest a postgresql:// or postgres:// URL,
         * ferry_shared_copy): the job's name, the same on every host, and
         * how long a claim stays a host's without a renewal (seconds; 0:
         * 60) */
        const char *job_name;
        unsigned lease;
};

struct ferry_summary {
        uint64_t files_seen;   /* entries found by the scan */
        uint64_t files_copied; /* copied in this run */
        uint64_t bytes_copied;
        uint64_t files_unchanged; /* skipped, already done */
        uint64_t files_failed;
        uint64_t files_vanished;
        uint64_t files_skipped; /* special files the options leave out */
        uint64_t files_deleted; /* --delete */
        uint64_t files_linked;  /* made as hard links (no data) */
        uint64_t files_adopted; /* --adopt: found equal in DST, kept */
        uint64_t meta_applied;  /* metadata alone applied in place */
        uint64_t meta_failed;   /* data arrived, some metadata did not */
        uint64_t meta_differs;  /* verify: metadata differs */
        uint64_t verified;      /* verify: files checked */
        uint64_t mismatched;    /* verify: differing or missing */
        uint64_t scan_errors;
        double seconds;
        unsigned jobs_peak; /* the most copies allowed in flight at once
                               (-j N, or the highest -j auto reached) */
        unsigned workers;   /* worker threads started */
};

/*
 * Live control of a running job: the settings `ferry set` changes and the
 * run applies within about a second. They live in "<manifest>.control"
 * (not in the manifest: the run holds its write lock), which the run
 * writes when it starts (from its options) and removes when it ends; they
 * apply to that run only, never to the next one.
 */
struct ferry_control {
        long pid;                     /* the run they belong to */
        uint64_t serial;              /* changes made by `ferry set` */
        uint64_t bwlimit;             /* bytes per second; 0: no limit */
        unsigned jobs;                /* copies in flight; 0: -j auto */
        bool paused;                  /* `ferry set --pause` */
        int window_start, window_end; /* as in ferry_options; -1: none */
};
/* What `ferry set` changes; the rest stays. */
struct ferry_set_req {
        bool set_bwlimit, set_jobs, set_window;
        uint64_t bwlimit;
        unsigned jobs;                /* 0: auto */
        int pause;                    /* 1 pause, 0 resume, -1 leave */
        int window_start, window_end; /* -1 -1: no window */
};
/* Changes a running job's settings (the job named as for
 * ferry_status_read); fills *now with them after the change. Fails with
 * FERRY_EUSAGE when no run holds the job, FERRY_EPATH when the control
 * file cannot be written. */
int ferry_set(const char *manifest, const char *src, const char *dst,
              const struct ferry_set_req *req, struct ferry_control *now,
              struct ferry_error *err);
/* "1M", "512K", "2.5G", "1000" (bytes per second; K, M, G powers of 1024,
 * as rsync's --bwlimit); 0 is no limit. 0, or -1 for anything else. */
int ferry_parse_rate(const char *s, uint64_t *out);
/* "HH:MM-HH:MM" as minutes after midnight (start != end); 0 or -1. */
int ferry_parse_window(const char *s, int *start, int *end);
/* Whether minute now (0-1439) is inside the window start-end (a window
 * that wraps midnight included); no window (-1) is always inside. */
bool ferry_window_inside(int start, int end, int now);
/* The minute of the day, local time (FERRY_TEST_CLOCK=HH:MM stands in for
 * the clock in a test build). */
int ferry_window_now(void);

/* Job state for `ferry status`; read-only, safe while a run goes on. */
struct ferry_state_count {
        uint64_t files;
        uint64_t bytes;
};

struct ferry_status_info {
        char manifest[4096];
        char src[4096];
        char dst[4096];
        long running_pid;       /* 0 when no run holds the job; -1 when one
                                 * does but the lock names no live process */
        char running_host[256]; /* the host the lock names, "" when it
                                 * names none (an older ferry's lock) */
        int lock_errno;         /* nonzero: the lock file could not be opened
                                 * (this errno), so running is unknown */
        int64_t last_start;     /* unix seconds, 0 = never */
        int64_t last_end;
        int last_result; /* enum ferry_code of the last run, -1 */
        struct ferry_state_count done, pending, failed, skipped, vanished;
        uint64_t not_in_source; /* rows removed from SRC (not deleted) */
        uint64_t meta_failed;   /* done rows whose metadata fell short */
        uint64_t dirs;
        /* the running job's live settings (struct ferry_control), when
         * has_control: a run holds the job and its control file is there */
        bool has_control;
        struct ferry_control control;
        /* files copied in chunks, not done yet (counted in pending), and
         * the bytes of their chunks already in DST's temp files */
        struct ferry_state_count partial;
};

/*
 * One failure of `ferry status`, handed to a ferry_failure_fn by
 * ferry_status_read; everything in it is borrowed for the call. Failures
 * come grouped by cause (struct ferry_failure: side, step, errno), the
 * cause with the most failures first; within a cause, by path as bytes
 * (the order of `LC_ALL=C sort`).
 */
struct ferry_failure_row {
        const char *path; /* relative to SRC and DST; "." is the top
                             directory itself */
        size_t path_len;
        struct ferry_failure fail; /* all 0: an older ferry recorded it */
        const char *reason;        /* the message recorded with it */
        uint64_t cause_count;      /* failures of this cause in all */
        uint64_t cause_index;      /* 0 for the first of its cause */
        bool meta; /* not a failure: the data arrived, the metadata of
                      fail did not (these come after every failure) */
};

typedef void (*ferry_failure_fn)(const struct ferry_failure_row *row,
                                 void *arg);
/* Called once by ferry_status_read with the counts, before any failure
 * and from the same read of the manifest. */
typedef void (*ferry_status_fn)(const struct ferry_status_info *info,
                                void *arg);

/* What ferry_status_read hands on, beyond filling info. */
struct ferry_status_req {
        ferry_status_fn on_info;     /* may be NULL */
        ferry_failure_fn on_failure; /* may be NULL */
        void *arg;
        uint64_t per_cause; /* failures handed on per cause; 0 = all */
};

struct ferry_job;

/* Fills opt with the defaults (batch durability, hard links, perms, owner,
 * times on, -j auto (jobs 0), 64 scanners, 3 retries, no --max-delete
 * limit). */
void ferry_options_init(struct ferry_options *opt);

/*
 * Resolves SRC and DST, opens (creating if needed) the manifest and takes the
 * job's lock. On success *out owns everything; free it with ferry_job_close.
 * On failure *out is NULL and err says why.
 */
int ferry_job_open(const struct ferry_options *opt, struct ferry_job **out,
                   struct ferry_error *err);

/* Copy, resume or incremental re-run. Fills sum (caller-owned). */
int ferry_job_run(struct ferry_job *job, struct ferry_summary *sum,
                  struct ferry_error *err);

/* Re-read DST (and/or SRC) and compare with the manifest. */
int ferry_job_verify(struct ferry_job *job, enum ferry_verify_mode mode,
                     struct ferry_summary *sum, struct ferry_error *err);

/* The manifest path the job uses; valid until ferry_job_close. */
const char *ferry_job_manifest(const struct ferry_job *job);

/* Releases the lock and frees the job. NULL is fine. */
void ferry_job_close(struct ferry_job *job);

/*
 * Reads a job's state without taking its lock. manifest is a path; when
 * NULL, src and dst name the job. Fills info, and hands it and the
 * failures on as req says (req may be NULL), all from one read
 * transaction: the failures listed are those the counts count.
 */
int ferry_status_read(const char *manifest, const char *src, const char *dst,
                      const struct ferry_status_req *req,
                      struct ferry_status_info *info, struct ferry_error *err);

/* One job of the state directory, handed to a ferry_job_list_fn; all of
 * it borrowed for the call. */
struct ferry_job_entry {
        const char *manifest; /* its path */
        int code;             /* 0, or why it could not be read (locked,
                                 corrupt, another schema): an enum
                                 ferry_code, and error says more */
        const char *error;    /* "" when code is 0 */
        const struct ferry_status_info *info; /* as ferry_status_read fills
                                                 it; with code, partly */
};

typedef void (*ferry_job_list_fn)(const struct ferry_job_entry *job, void *arg);

/*
 * `ferry status` without a job: every manifest ("*.db") of the state
 * directory ($XDG_STATE_HOME/ferry, else ~/.local/state/ferry), in name
 * order, read as ferry_status_read reads one (no lock taken, no failure
 * rows), handed to fn, also those that cannot be read. *dir is set to the
 * directory (caller frees) on success; a directory that does not exist
 * holds no job. An error only when the directory cannot be named or
 * listed.
 */
int ferry_status_list(ferry_job_list_fn fn, void *arg, char **dir,
                      struct ferry_error *err);

/*
 * `ferry export`: the file rows of a job's manifest (not directories), in
 * manifest order (by directory as recorded, then by name as bytes). The
 * numbers of ferry_file_type and ferry_file_state are the manifest's.
 */
enum ferry_file_type {
        FERRY_FILE_REG = 1,
        FERRY_FILE_SYMLINK = 2,
        FERRY_FILE_SPECIAL = 3, /* fifo, device, socket */
};

enum ferry_file_state {
        FERRY_FILE_PENDING = 0,
        FERRY_FILE_DONE = 1,
        FERRY_FILE_FAILED = 2,
        FERRY_FILE_SKIPPED = 3,
        FERRY_FILE_VANISHED = 4, /* gone between scan and copy */
        FERRY_FILE_REMOVED = 5,  /* no longer in SRC */
};

/* One row, borrowed for the call of a ferry_export_fn. */
struct ferry_export_row {
        const char *path; /* relative to SRC and DST, any bytes but NUL */
        size_t path_len;
        enum ferry_file_type type;
        enum ferry_file_state state;
        uint64_t size;     /* SRC's, as recorded */
        int64_t mtime_sec; /* SRC's, since the epoch (any year) */
        uint32_t mtime_nsec;
        uint32_t mode; /* st_mode, type bits included */
        uint32_t uid, gid;
        bool has_hash;
        unsigned char hash[16]; /* XXH3-128, canonical (big-endian); of
                                   the link's target for a symlink */
};

/* Returns 0 to see the next row; any other value stops the export, and
 * ferry_export_read returns it. */
typedef int (*ferry_export_fn)(const struct ferry_export_row *row, void *arg);

struct ferry_export_req {
        bool done_only; /* only rows in state FERRY_FILE_DONE */
        ferry_export_fn on_row;
        void *arg;
};

/*
 * Hands the file rows of a job's manifest to req->on_row, without taking
 * the job's lock, as ferry_status_read reads (manifest, or src and dst,
 * name the job). Reads in short read transactions of a few thousand rows,
 * so a running job goes on meanwhile: each row is as one commit left it,
 * and rows a run changes meanwhile may show before or after the change.
 */
int ferry_export_read(const char *manifest, const char *src, const char *dst,
                      const struct ferry_export_req *req,
                      struct ferry_error *err);

/* "file", "symlink", "special"; "pending", "done", "failed", "skipped",
 * "vanished", "removed"; "?" for another number. Static strings. */
const char *ferry_file_type_str(int type);
const char *ferry_file_state_str(int state);

/*
 * A shared manifest (PostgreSQL, src/shared/): whether manifest names one,
 * and a copy as one host of the job opt->job_name, which any number of
 * hosts that mount SRC and DST join with the same command (with
 * opt->verify set: ferry_shared_verify). The options it cannot honour yet
 * are refused (FERRY_EUSAGE).
 *
 * ferry_shared_verify re-reads (mode) DST's and/or SRC's copy of every
 * done file of the existing job opt->job_name from this one host and
 * compares size and content with the recorded hash (not metadata: the
 * job records none of what it applied); a file missing or differing is
 * made pending, so that the job's copy command repairs it. Makes no job
 * (none of that name: FERRY_EPATH) and writes nothing into DST.
 */
bool ferry_manifest_is_shared(const char *manifest);
int ferry_shared_copy(const struct ferry_options *opt,
                      struct ferry_summary *sum, struct ferry_error *err);
int ferry_shared_verify(const struct ferry_options *opt,
                        enum ferry_verify_mode mode, struct ferry_summary *sum,
                        struct ferry_error *err);

/* Asks a running job to stop soon (async-signal-safe). */
void ferry_request_stop(void);

/* A static English description of a result code. */
const char *ferry_code_str(int code);

/*
 * How ferry_escape writes a name or path (bits; 0: the library's own
 * messages, where backslash, quote and control bytes are escaped as \\,
 * \' and \xHH and every other byte is kept):
 *   FERRY_ESC_QUOTE     wrap in '...'; a ' inside is escaped
 *   FERRY_ESC_TERMINAL  the command line's paths: \n and \t as such, and
 *                       bytes that are not valid UTF-8 as \xHH too
 *   FERRY_ESC_JSON      a JSON string with its quotes; bytes that are not
 *                       valid UTF-8 as \u00HH (the other bits are ignored)
 */
enum { FERRY_ESC_QUOTE = 1, FERRY_ESC_TERMINAL = 2, FERRY_ESC_JSON = 4 };

/* Escapes s (len bytes, any bytes) into out (size bytes, may be 0), NUL-
 * terminated and cut short when it does not fit; returns the length of the
 * whole escape, as snprintf does. Allocates nothing. */
size_t ferry_escape(char *out, size_t size, const char *s, size_t len,
                    unsigned flags);

/* True in a build with the test hooks (cmake -DFERRY_TESTING=ON): the
 * FERRY_FAULT and FERRY_CRASH environment variables are then honoured. */
bool ferry_test_hooks_built(void);

#ifdef __cplusplus
}
#endif
#endif
