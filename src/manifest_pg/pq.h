/*
 * manifest_pg/pq.h - libpq, loaded when a shared manifest is first used
 * (dlopen of libpq.so.5), not linked: linked, libpq and what it pulls in
 * (OpenSSL, GnuTLS, Kerberos, LDAP: 22 more libraries) cost every ferry
 * run about 5.7 MiB of resident memory at start, a third of the 16 MiB
 * a run may use, for a manifest most runs never open.
 *
 * The files of src/manifest_pg/ include this instead of <libpq-fe.h>: the
 * names PQ... then call through the table ferry_pq, which
 * ferry_pq_load fills once (ferry_pg_connect calls it before any other).
 */
#ifndef FERRY_MANIFEST_PG_PQ_H
#define FERRY_MANIFEST_PG_PQ_H

#include <libpq-fe.h>
#include <stddef.h>

#define FERRY_PQ_LIBRARY "libpq.so.5"

/* X(name) for every libpq function ferry calls */
#define FERRY_PQ_FUNCS(X)                                                      \
        X(PQclear)                                                             \
        X(PQcmdTuples)                                                         \
        X(PQconnectdbParams)                                                   \
        X(PQconninfoFree)                                                      \
        X(PQconninfoParse)                                                     \
        X(PQerrorMessage)                                                      \
        X(PQexec)                                                              \
        X(PQexecParams)                                                        \
        X(PQfinish)                                                            \
        X(PQfreemem)                                                           \
        X(PQgetisnull)                                                         \
        X(PQgetlength)                                                         \
        X(PQgetvalue)                                                          \
        X(PQntuples)                                                           \
        X(PQpingParams)                                                        \
        X(PQresultErrorField)                                                  \
        X(PQresultErrorMessage)                                                \
        X(PQresultStatus)                                                      \
        X(PQsetNoticeProcessor)                                                \
        X(PQstatus)                                                            \
        X(PQtransactionStatus)

#define FERRY_PQ_MEMBER(f) __typeof__(f) *f;
struct ferry_pq_api {
        FERRY_PQ_FUNCS(FERRY_PQ_MEMBER)
};
#undef FERRY_PQ_MEMBER
extern struct ferry_pq_api ferry_pq;

/* Loads libpq once (any thread); 0, or -1 with the reason in err. */
int ferry_pq_load(char *err, size_t size);

#ifndef FERRY_PQ_IMPL
#define PQclear              (ferry_pq.PQclear)
#define PQcmdTuples          (ferry_pq.PQcmdTuples)
#define PQconnectdbParams    (ferry_pq.PQconnectdbParams)
#define PQconninfoFree       (ferry_pq.PQconninfoFree)
#define PQconninfoParse      (ferry_pq.PQconninfoParse)
#define PQerrorMessage       (ferry_pq.PQerrorMessage)
#define PQexec               (ferry_pq.PQexec)
#define PQexecParams         (ferry_pq.PQexecParams)
#define PQfinish             (ferry_pq.PQfinish)
#define PQfreemem            (ferry_pq.PQfreemem)
#define PQgetisnull          (ferry_pq.PQgetisnull)
#define PQgetlength          (ferry_pq.PQgetlength)
#define PQgetvalue           (ferry_pq.PQgetvalue)
#define PQntuples            (ferry_pq.PQntuples)
#define PQpingParams         (ferry_pq.PQpingParams)
#define PQresultErrorField   (ferry_pq.PQresultErrorField)
#define PQresultErrorMessage (ferry_pq.PQresultErrorMessage)
#define PQresultStatus       (ferry_pq.PQresultStatus)
#define PQsetNoticeProcessor (ferry_pq.PQsetNoticeProcessor)
#define PQstatus             (ferry_pq.PQstatus)
#define PQtransactionStatus  (ferry_pq.PQtransactionStatus)
#endif

#endif
